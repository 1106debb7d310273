"""Tokens/s and MFU measured between log steps only, so the hot path has no per-step device sync.

Lightning's ThroughputMonitor synchronises CUDA on every batch and logs nothing for its first
`window_size` batches; this callback times whole log intervals instead. Time spent in validation
inside an interval is subtracted: it is not training time.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import lightning as L
import torch

from gptlab.hardware import PEAK_FLOPS, chip

log = logging.getLogger(__name__)

# the GPU table (memory and dense peaks) is gptlab.hardware's, shared with the planner (scripts/plan.py)
__all__ = ["PEAK_FLOPS", "chip", "compute_type", "peak_flops", "tokens_per_step", "LogStepThroughput"]


def compute_type(precision: str) -> str | None:
    """What the matmuls of a Lightning precision setting run in: bf16, tf32 or fp32 (None: fp64)."""
    p = str(precision)
    if p.startswith(("bf16", "16")):
        return "bf16"  # fp16 peaks equal bf16 peaks on every chip in the table
    if p.startswith("32"):
        return "fp32" if torch.get_float32_matmul_precision() == "highest" else "tf32"
    return None


def peak_flops(device: torch.device, precision: str = "bf16-mixed") -> float | None:
    """Dense peak FLOP/s of a known GPU for the run's precision; None elsewhere (the benchmark
    measures a CPU's own matmul peak instead)."""
    if device.type != "cuda":
        return None
    row = chip(torch.cuda.get_device_name(device))
    kind = compute_type(precision)
    if row is None or kind is None:
        log.warning(
            "no peak FLOP/s known for %s at precision %s: MFU not logged",
            torch.cuda.get_device_name(device),
            precision,
        )
        return None
    return PEAK_FLOPS[row][kind]


def tokens_per_step(batch_size: int, block_size: int, accumulate: int = 1, world_size: int = 1) -> int:
    """Tokens one optimizer step trains on: every rank's micro-batches of `batch_size` windows, each
    predicting `block_size` targets (a window holds one token more, the last target)."""
    return batch_size * block_size * accumulate * world_size


class LogStepThroughput(L.Callback):
    """Logs throughput/tokens_per_sec, throughput/step_time and throughput/mfu every `every` steps."""

    def __init__(self, every: int) -> None:
        self.every = max(1, every)
        self._t0: float | None = None
        self._step0 = 0
        self._paused = 0.0  # seconds of validation inside the current interval
        self._val_t0: float | None = None
        self.last_tokens_per_sec: float | None = None
        self.flops_per_token: int | None = None

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.flops_per_token = pl_module.model.flops_per_token()
        self._peak = peak_flops(pl_module.device, str(trainer.precision))

    def _now(self, pl_module: L.LightningModule) -> float:
        if pl_module.device.type == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter()

    def on_validation_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self._t0 is not None:
            self._val_t0 = self._now(pl_module)

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self._val_t0 is not None:
            self._paused += self._now(pl_module) - self._val_t0
            self._val_t0 = None

    def on_train_batch_end(
        self,
        trainer: L.Trainer,
        pl_module: L.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
    ) -> None:
        step = trainer.global_step
        if step % self.every != 0 or step == self._step0:
            return
        now = self._now(pl_module)
        if self._t0 is not None:  # the first interval includes compilation and warm-up: skip it
            steps = step - self._step0
            per_step = tokens_per_step(
                batch.shape[0], batch.shape[1] - 1, trainer.accumulate_grad_batches, trainer.world_size
            )
            tokens = steps * per_step
            dt = now - self._t0 - self._paused
            self.last_tokens_per_sec = tokens / dt
            metrics = {
                "throughput/tokens_per_sec": self.last_tokens_per_sec,
                "throughput/step_time": dt / steps,
            }
            if self._peak and self.flops_per_token:
                per_device = self.last_tokens_per_sec / trainer.world_size
                metrics["throughput/mfu"] = per_device * self.flops_per_token / self._peak
            pl_module.log_dict(metrics)
        self._t0, self._step0, self._paused = now, step, 0.0
