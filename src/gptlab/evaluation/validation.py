"""Validation's arithmetic, shared by the LightningModule and evaluate.py so both give one number.

A val batch is (tokens, weight): weight 1 for a window of the val subset, 0 for the padding that
evens out the ranks' batch counts. Each batch contributes [Σ token losses, token count] in float64;
the run sums these over batches and ranks (a SUM all-reduce) and reports loss = sum / count, the
mean over every scored token, whatever the world size or batch size.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F


def loss_sum_and_count(
    model: Callable[[torch.Tensor], torch.Tensor], tokens: torch.Tensor, weight: torch.Tensor
) -> torch.Tensor:
    """[Σ weighted next-token losses, Σ weighted token counts] of one batch, float64 on its device.

    float64 so the sums do not depend on how windows are grouped into batches and ranks.
    """
    x, y = tokens[:, :-1], tokens[:, 1:]
    logits = model(x).float()
    per_token = F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1), reduction="none")
    per_window = per_token.view_as(y).double().sum(dim=1)
    w = weight.to(torch.float64)
    total = torch.where(w > 0, per_window * w, torch.zeros_like(per_window)).sum()
    return torch.stack([total, w.sum() * y.size(1)])


def val_metrics(totals: torch.Tensor, bytes_per_token: float) -> dict[str, torch.Tensor]:
    """val/loss (nats/token), val/ppl and val/bpb from summed [loss, count] (float32 for logging)."""
    if float(totals[1]) <= 0:
        raise ValueError("validation scored no tokens; data.val_windows must select at least one window")
    loss = (totals[0] / totals[1]).float()
    return {
        "val/loss": loss,
        "val/ppl": torch.exp(loss),
        "val/bpb": loss / math.log(2) / bytes_per_token,
    }
