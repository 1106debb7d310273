"""The next-token objective as one function of the logits, so that `compile` can fuse it.

Eager, `logits.float()` writes an fp32 copy of the (B·T, V) logits, cross-entropy reads it back and
its backward writes another fp32 gradient before the cast back: at GPT-2's V = 50304 the largest
tensors of the step. Compiled (the run's `compile`, on by default on a GPU) inductor fuses the cast
into the log-softmax reductions and its backward, so the fp32 copies are never stored. The log
steps that keep logit statistics (telemetry) take the module's eager path instead: they need the
flat logits themselves.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

LossFn = Callable[[torch.Tensor, torch.Tensor, float], tuple[torch.Tensor, torch.Tensor | None]]


def token_losses(
    logits: torch.Tensor, targets: torch.Tensor, z_coef: float
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(mean cross-entropy, mean log²Z or None when z_coef is 0), in fp32, of (B, T, V) logits."""
    vocab = logits.size(-1)
    flat = logits.float().reshape(-1, vocab)
    del logits  # eager: the (bf16 under autocast) logits die once cast, N·V·2 bytes off the peak
    ce = F.cross_entropy(flat, targets.reshape(-1))
    if z_coef > 0:
        return ce, torch.logsumexp(flat, dim=-1).pow(2).mean()
    return ce, None


def loss_fn(compiled: bool) -> LossFn:
    """token_losses, compiled (one graph for the run: the shapes and z_coef do not change) or not."""
    return torch.compile(token_losses) if compiled else token_losses
