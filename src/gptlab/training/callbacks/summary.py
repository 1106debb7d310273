"""metrics.json in the run directory: final and best figures, divergence, throughput."""

from __future__ import annotations

import math
import os
import time
from pathlib import Path
from typing import Any

import lightning as L

from gptlab.training.run_record import write_json_atomic as write_json_atomic  # its callers import it here


def _scalar(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


class RunSummary(L.Callback):
    """Tracks losses at log/val steps (already host values there) and writes metrics.json at the end."""

    def __init__(self, run_dir: str | os.PathLike, extra: dict[str, Any] | None = None) -> None:
        self.path = Path(run_dir) / "metrics.json"
        self.extra = extra or {}
        self.train_losses: list[tuple[int, float]] = []
        self.val_losses: list[tuple[int, float]] = []
        self.diverged = False
        self._start = time.time()

    def on_train_batch_end(
        self, trainer: L.Trainer, pl_module: Any, outputs: Any, batch: Any, i: int
    ) -> None:
        if trainer.global_step % max(1, trainer.log_every_n_steps) != 0:
            return
        if (i + 1) % max(1, trainer.accumulate_grad_batches) != 0:
            return  # a step's last micro-batch: the next one's global_step is the same, its loss too
        loss = _scalar(trainer.callback_metrics.get("train/loss"))
        if loss is None:
            return
        self.train_losses.append((trainer.global_step, loss))
        first = self.train_losses[0][1]
        if not math.isfinite(loss) or loss > 3 * max(first, 1e-9):
            self.diverged = True

    def on_validation_end(self, trainer: L.Trainer, pl_module: Any) -> None:
        loss = _scalar(trainer.callback_metrics.get("val/loss"))
        if loss is not None and not trainer.sanity_checking:
            self.val_losses.append((trainer.global_step, loss))
            if not math.isfinite(loss):
                self.diverged = True

    def summary(self, trainer: L.Trainer, status: str) -> dict[str, Any]:
        finite_val = [v for _, v in self.val_losses if math.isfinite(v)]
        metrics = trainer.callback_metrics
        result = {
            "status": status,
            "steps": trainer.global_step,
            "final_train_loss": self.train_losses[-1][1] if self.train_losses else None,
            "final_val_loss": self.val_losses[-1][1] if self.val_losses else None,
            "best_val_loss": min(finite_val) if finite_val else None,
            "final_val_bpb": _scalar(metrics.get("val/bpb")),
            "tokens_seen": _scalar(metrics.get("tokens_seen")),
            "tokens_per_sec": _scalar(metrics.get("throughput/tokens_per_sec")),
            "max_grad_norm": next(
                (c.max_grad_norm for c in trainer.callbacks if hasattr(c, "max_grad_norm")), None
            ),
            "diverged": self.diverged,
            "wall_time_s": round(time.time() - self._start, 2),
            "train_curve": self.train_losses,
            "val_curve": self.val_losses,
            "tasks": {},  # callbacks/tasks.py fills it: each task's last evaluation
        }
        for c in trainer.callbacks:  # e.g. the spike watch's n_spikes, first_spike_step; `tasks`
            if c is not self and hasattr(c, "summary_fields"):
                result.update(c.summary_fields())
        result.update(self.extra)
        return result

    def write(self, trainer: L.Trainer, status: str, **more: Any) -> dict[str, Any]:
        """Write metrics.json atomically (rank zero only) and return what was written."""
        data = {**self.summary(trainer, status), **more}
        if trainer.global_rank == 0:
            write_json_atomic(self.path, data)
        return data
