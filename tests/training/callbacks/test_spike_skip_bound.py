"""`callbacks.spikes.on_spike=skip` after a lasting level shift (issue 25, item 5).

A spike does not move the EMA, so once the loss settles at a new level every later step would be a
"spike" and lose its update: training froze (79 updates in a row dropped) while
`train/skipped_steps` said 0. The policy is bounded: at most `max_consecutive` spike steps in a row,
then the next is taken as the new level (update applied, EMA restarted, one warning), and every
dropped update is counted.

Two tests: the detector fed a level shift directly (fast), and a real run whose learning rate a
Lightning callback raises to 0.1 for one step (the issue's recipe), where the dropped updates are
counted independently, by comparing every parameter before and after each step.
"""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import lightning as L
import pytest
import torch

from gptlab.training.callbacks.spikes import SpikeWatch
from tests.training.rel_harness import series, train_here, with_callbacks

K = 3


class FakeModule:
    """What SpikeWatch reads from the LightningModule; counts the drops it is asked for."""

    def __init__(self) -> None:
        self.last_loss: torch.Tensor | None = None
        self._skip = False
        self.asked: list[int] = []
        self.step = 0
        self.model = SimpleNamespace(blocks=[])

    @property
    def skip_update(self) -> bool:
        return self._skip

    @skip_update.setter
    def skip_update(self, value: bool) -> None:
        if value:
            self.asked.append(self.step)
        self._skip = value


def feed(watch: SpikeWatch, losses: list[float], start: int = 0) -> FakeModule:
    """Steps start.. of `losses`, as the training loop calls the watch (one micro-batch a step)."""
    trainer = SimpleNamespace(
        accumulate_grad_batches=1, world_size=1, global_step=0, is_global_zero=True, callbacks=[]
    )
    module = FakeModule()
    for step in range(start, len(losses)):
        value = losses[step]
        trainer.global_step = module.step = step
        module.last_loss = torch.tensor(value)
        watch.on_train_batch_start(trainer, module, None, step)  # type: ignore[arg-type]
        watch.on_before_backward(trainer, module, module.last_loss)  # type: ignore[arg-type]
        module.skip_update = False  # the module's clipping consumes the request
    return module


def shifted(n_before: int = 40, n_after: int = 30) -> list[float]:
    """A noisy loss at 3 (σ ≈ 0.02), then a lasting jump to 6 that decays slowly."""
    before = [3.0 + 0.02 * math.sin(1.7 * i) for i in range(n_before)]
    after = [6.0 - 0.01 * i + 0.02 * math.sin(1.3 * i) for i in range(n_after)]
    return before + after


@pytest.mark.parametrize("policy", ["skip", "record"])
def test_a_level_shift_gives_at_most_k_spikes_in_a_row_then_a_new_level(
    policy: str, caplog: pytest.LogCaptureFixture
) -> None:
    watch = SpikeWatch(None, ema_decay=0.9, warmup_steps=10, on_spike=policy, max_consecutive=K)
    with caplog.at_level(logging.WARNING, logger="gptlab.training.callbacks.spikes"):
        module = feed(watch, shifted())
    spikes = [r["step"] for r in watch.spikes]
    assert spikes == [40, 41, 42]  # K in a row, then step 43 is the new level and nothing after it
    assert watch.rebaselines == [43]
    assert watch.ema is not None and abs(watch.ema - 5.8) < 0.3  # restarted at the new level
    assert module.asked == (spikes if policy == "skip" else [])
    assert watch.dropped == len(module.asked)
    fields = watch.summary_fields()
    assert fields["spike_updates_dropped"] == len(module.asked) and fields["spike_rebaseline_steps"] == [43]
    lines = [r.getMessage() for r in caplog.records if "new level" in r.getMessage()]
    assert len(lines) == 1 and "step 43" in lines[0], lines


def test_the_count_and_the_row_survive_a_resume() -> None:
    losses = shifted()
    whole = SpikeWatch(None, ema_decay=0.9, warmup_steps=10, on_spike="skip", max_consecutive=K)
    asked_whole = feed(whole, losses).asked
    first = SpikeWatch(None, ema_decay=0.9, warmup_steps=10, on_spike="skip", max_consecutive=K)
    feed(first, losses[:42])  # stopped inside the row of spikes
    again = SpikeWatch(None, ema_decay=0.9, warmup_steps=10, on_spike="skip", max_consecutive=K)
    again.load_state_dict(first.state_dict())
    module = feed(again, losses, start=42)
    assert [s for s in asked_whole if s >= 42] == module.asked  # the row ends where it would have
    assert again.dropped == whole.dropped == K


# ---- the recipe, end to end ---------------------------------------------------------------
SHIFT, STEPS = 30, 60
RUN = [
    "model.n_embd=64",
    "model.n_head=2",
    "model.block_size=64",
    "data.batch_size=8",
    "data.max_bytes=200000",
    f"trainer.max_steps={STEPS}",
    "trainer.val_check_interval=1000",
    "callbacks.spikes.on_spike=skip",
    "callbacks.spikes.warmup_steps=10",
    "callbacks.spikes.threshold=3",  # the tiny batch is noisy: 6σ would not see the shift
    f"callbacks.spikes.max_consecutive={K}",
]


class RaiseLR(L.Callback):
    """The learning rate is 0.1 for step SHIFT only (the scheduler sets it back at the next step)."""

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: Any, batch: Any, batch_idx: int) -> None:
        if trainer.global_step == SHIFT:
            for group in trainer.optimizers[0].param_groups:
                group["lr"] = 0.1


class Unchanged(L.Callback):
    """The steps whose update left every parameter bit-identical: dropped updates, counted here."""

    def __init__(self) -> None:
        self.steps: list[int] = []
        self._before: list[torch.Tensor] = []

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: Any, batch: Any, batch_idx: int) -> None:
        self._before = [p.detach().clone() for p in pl_module.parameters()]

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: Any, *args: Any) -> None:
        if all(torch.equal(a, p) for a, p in zip(self._before, pl_module.parameters(), strict=True)):
            self.steps.append(trainer.global_step - 1)


def longest_row(steps: list[int]) -> int:
    best = run = 0
    for i, s in enumerate(steps):
        run = run + 1 if i and s == steps[i - 1] + 1 else 1
        best = max(best, run)
    return best


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("spike-bound-cache")


def test_skip_after_a_raised_lr_recovers_and_counts_what_it_dropped(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    calm = train_here(tmp_path / "calm", cache, *RUN)
    unchanged = Unchanged()
    with_callbacks(monkeypatch, RaiseLR(), unchanged)
    with caplog.at_level(logging.WARNING, logger="gptlab.training.callbacks.spikes"):
        result = train_here(tmp_path / "shifted", cache, *RUN)

    assert unchanged.steps, "the raised LR made no spike: the test no longer tests the policy"
    assert all(s > SHIFT for s in unchanged.steps)
    assert longest_row(unchanged.steps) <= K, unchanged.steps  # was every step after the shift
    skipped = series(tmp_path / "shifted", "train/skipped_steps")
    assert skipped[STEPS - 1] == len(unchanged.steps)  # was 0
    on_disk = json.loads((tmp_path / "shifted" / "metrics.json").read_text())
    assert on_disk["spike_updates_dropped"] == len(unchanged.steps)
    assert result["spike_steps"] == unchanged.steps
    rebaselined = [r.getMessage() for r in caplog.records if "new level" in r.getMessage()]
    assert len(rebaselined) == len(result["spike_rebaseline_steps"]) >= 1
    # training went on: the frozen run ended near the loss right after the shift (> 5 nats)
    assert result["final_val_loss"] < calm["final_val_loss"] + 0.6, (result, calm)
