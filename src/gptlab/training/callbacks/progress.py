"""A progress bar that reads the training loss only when it redraws.

Metrics logged with `prog_bar=True` are converted to Python numbers by Lightning after every batch
(`_ResultCollection.metrics` → `convert_tensors_to_scalars`), which on a GPU is a host-device sync
per step. The module therefore logs `train/loss` without `prog_bar` (and on log steps only), keeps
the step's loss as a device tensor in `last_loss`, and this bar reads it on the steps it redraws.
"""

from __future__ import annotations

from typing import Any

import lightning as L
from lightning.pytorch.callbacks import TQDMProgressBar

SHOWN = "train/loss"


class LossProgressBar(TQDMProgressBar):
    """TQDMProgressBar plus train/loss, read (one host sync) only at each refresh."""

    def get_metrics(self, trainer: L.Trainer, pl_module: L.LightningModule) -> dict[str, Any]:
        """Lightning calls this when the bar redraws: every `refresh_rate` batches."""
        items = super().get_metrics(trainer, pl_module)
        loss = getattr(pl_module, "last_loss", None)  # this step's loss (logged on log steps only)
        if loss is None:
            loss = trainer.callback_metrics.get(SHOWN)
        if loss is not None and SHOWN not in items:
            items[SHOWN] = float(loss)
        return items
