"""The planner's peak is a telemetry log step's, measured against a real one: gptlab's module and
its LayerTelemetry callback in a real Lightning fit on this CPU, torch's MemTracker over the second
optimizer step (the first that holds AdamW's state and the previous step's gradients, as every
later step does). On a log step the first micro-batch's forward also computes the logit moments
and log Z over the fp32 logits and keeps q and k, and the block weights are copied before the
update: above the plain step's peak.

Since the log step's logit moments stopped writing a squared copy of the logits (2026-12-06), its
peak is where the real step holds one float32 scalar more than the plan's fake step (4 bytes at this
shape; not Lightning's `self.log`: the same without it); `SCALARS` bytes of such are allowed."""

from __future__ import annotations

import dataclasses
from typing import Any

import lightning as L
import pytest
import torch
from torch.distributed._tools.mem_tracker import MemTracker

from gptlab.config import OptimConfig
from gptlab.model import GPTConfig
from gptlab.planning.report import planned_step
from gptlab.planning.step import Setup, measure, split
from gptlab.training.callbacks.telemetry import LayerTelemetry
from gptlab.training.module import GPTLightningModule

SHAPE = {"n_layer": 1, "n_head": 4, "n_embd": 64, "block_size": 64, "vocab_size": 4096}
B = 8
SCALARS = 64  # bytes: scalars the real step holds beyond the plan (see the docstring)


class PeakOfStep(L.Callback):
    """MemTracker around optimizer step `at` (batch start to batch end), split as the planner splits."""

    def __init__(self, at: int) -> None:
        self.at = at
        self.tracker: MemTracker | None = None
        self.peak: dict[str, int] = {}

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: Any, batch: Any, batch_idx: int) -> None:
        if trainer.global_step == self.at:
            self.tracker = MemTracker()
            self.tracker.track_external(pl_module.model, trainer.optimizers[0], batch)
            self.tracker.__enter__()

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: Any, out: Any, batch: Any, i: int) -> None:
        if self.tracker is not None and trainer.global_step - 1 == self.at:
            self.tracker.__exit__(None, None, None)
            (snap,) = self.tracker.get_tracker_snapshot("peak").values()
            self.peak = split(snap)
            self.tracker = None


@pytest.fixture(scope="module")
def real_log_step() -> dict[str, int]:
    torch.manual_seed(0)
    cfg, optim = GPTConfig.from_dict(SHAPE), OptimConfig()
    module = GPTLightningModule(model=dataclasses.asdict(cfg), optim=dataclasses.asdict(optim))
    data = torch.utils.data.DataLoader(torch.randint(0, SHAPE["vocab_size"], (2 * B, 65)), batch_size=B)
    peak = PeakOfStep(at=1)
    trainer = L.Trainer(
        max_steps=2,
        accelerator="cpu",
        precision="32-true",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[peak, LayerTelemetry(every=1, figures=False)],  # every step a log step
    )
    trainer.fit(module, data)
    assert peak.peak, "the measured step did not run"
    return peak.peak


def test_plan_covers_a_real_log_step(real_log_step: dict[str, int]) -> None:
    """measured ≤ plan (equal to 1%: the fake step runs the callback's own hooks), and a plan of
    the plain step is below what the log step measured."""
    cfg = GPTConfig.from_dict(SHAPE)
    setup = Setup(cfg, OptimConfig(), B, precision="32-true", device="cpu")
    plan_log, plan_plain = measure(setup), measure(setup.replace(log_step=False))
    real = real_log_step["peak"]
    assert real <= plan_log.peak + SCALARS
    assert plan_log.peak == pytest.approx(real, rel=0.01)
    assert plan_plain.peak < real
    assert planned_step(setup).startswith("a telemetry log step (q/k kept")
    assert planned_step(setup.replace(log_step=False)) == "a plain training step (telemetry off)"
