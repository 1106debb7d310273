"""Tokens/s and MFU measured between log steps only, so the hot path has no per-step device sync.

Lightning's ThroughputMonitor synchronises CUDA on every batch and logs nothing for its first
`window_size` batches; this callback times whole log intervals instead.
"""

from __future__ import annotations

import time
from typing import Any

import lightning as L
import torch

# Dense bf16 peaks (tensor cores, no sparsity). Lightning's table misses a device named "NVIDIA H200".
PEAK_BF16_FLOPS = {"H200": 989e12, "H100": 989e12, "A100": 312e12, "L40S": 362e12, "A10G": 125e12}


def peak_flops(device: torch.device) -> float | None:
    """Dense bf16 peak FLOP/s of a known GPU; None elsewhere (the benchmark measures the CPU's)."""
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    for key, value in PEAK_BF16_FLOPS.items():
        if key in name:
            return value
    return None


class LogStepThroughput(L.Callback):
    """Logs throughput/tokens_per_sec, throughput/step_time and throughput/mfu every `every` steps."""

    def __init__(self, every: int) -> None:
        self.every = max(1, every)
        self._t0: float | None = None
        self._step0 = 0
        self.last_tokens_per_sec: float | None = None
        self.flops_per_token: int | None = None

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.flops_per_token = pl_module.model.flops_per_token()
        self._peak = peak_flops(pl_module.device)

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
        if pl_module.device.type == "cuda":
            torch.cuda.synchronize()
        now = time.perf_counter()
        if self._t0 is not None:  # the first interval includes compilation and warm-up: skip it
            steps = step - self._step0
            tokens = steps * trainer.accumulate_grad_batches * batch.shape[0] * (batch.shape[1] - 1)
            tokens *= trainer.world_size
            dt = now - self._t0
            self.last_tokens_per_sec = tokens / dt
            metrics = {
                "throughput/tokens_per_sec": self.last_tokens_per_sec,
                "throughput/step_time": dt / steps,
            }
            if self._peak and self.flops_per_token:
                per_device = self.last_tokens_per_sec / trainer.world_size
                metrics["throughput/mfu"] = per_device * self.flops_per_token / self._peak
            pl_module.log_dict(metrics)
        self._t0, self._step0 = now, step
