"""The spike watcher judges every step, on a GPU too, and its in-a-row counter counts rows only.

On a GPU the watcher reads each step's loss through an asynchronous copy and a CUDA event; with no
host syncs the host runs ahead of the device, so an event may still be pending when the next step
starts. Such a step used to be dropped unjudged. A real CUDA event does not exist on a CPU, so the
copy is replaced by `LateEvent`, an object with the same protocol as `torch.cuda.Event` as the watch
uses it (`query()`: done yet?, `synchronize()`: wait until done) that completes only after a set
number of polls. The oracle is the CPU path (every loss read at once) on the same losses: the late
path must find the same spikes, new levels and EMA.

Issue 48.6: the in-a-row counter (at most `max_consecutive` spike steps *in a row*, then a new level)
must restart at every ordinary step; spikes far apart must never add up to a "level shift".
"""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import torch

from gptlab.training.callbacks import spikes
from gptlab.training.callbacks.spikes import SpikeWatch
from tests.training.callbacks.test_spike_skip_bound import FakeModule, shifted


class LateEvent:
    """Completes after `polls` calls of query(), or at once on synchronize() (which it records)."""

    def __init__(self, polls: int, log: list[int], step: int) -> None:
        self.left, self.log, self.step = polls, log, step

    def query(self) -> bool:
        if self.left > 0:
            self.left -= 1
            return False
        return True

    def synchronize(self) -> None:
        self.left = 0
        self.log.append(self.step)


class LateWatch(SpikeWatch):
    """SpikeWatch whose loss copies complete late: step s's after `delays[s]` polls."""

    def __init__(self, delays: list[int], **kw: Any) -> None:
        super().__init__(None, **kw)
        self.delays, self.waited, self.copied = delays, [], 0
        self.max_inflight = 0

    def _copy_async(self, loss: torch.Tensor) -> tuple[torch.Tensor, Any]:
        step = self.copied
        self.copied += 1
        self.max_inflight = max(self.max_inflight, len(self._inflight) + 1)
        return loss.detach().clone(), LateEvent(self.delays[step], self.waited, step)


def run(watch: SpikeWatch, losses: list[float]) -> FakeModule:
    """Every step as the training loop calls the watch, then the end of training."""
    trainer = SimpleNamespace(
        accumulate_grad_batches=1, world_size=1, global_step=0, is_global_zero=True, callbacks=[]
    )
    module = FakeModule()
    for step, value in enumerate(losses):
        trainer.global_step = module.step = step
        module.last_loss = torch.tensor(value)
        watch.on_train_batch_start(trainer, module, None, step)  # type: ignore[arg-type]
        watch.on_before_backward(trainer, module, module.last_loss)  # type: ignore[arg-type]
        module.skip_update = False
    watch.on_train_end(trainer, module)  # type: ignore[arg-type]
    return module


def judged(watch: SpikeWatch) -> int:
    return watch.seen + len(watch.spikes)  # rebaselines are counted in seen


def test_late_events_are_waited_for_and_every_step_is_judged() -> None:
    losses = shifted()  # 40 steps at 3, then a lasting jump to 6: 3 spikes and a new level
    n = len(losses)
    # most copies land within a step or two; every seventh is very late (10 polls)
    delays = [10 if s % 7 == 3 else s % 3 for s in range(n)]
    kw = dict(ema_decay=0.9, warmup_steps=10, on_spike="record", max_consecutive=3)
    late, now = LateWatch(delays, **kw), SpikeWatch(None, **kw)
    run(late, losses)
    run(now, losses)
    assert judged(now) == n
    assert judged(late) == n, f"{n - judged(late)} step(s) dropped unjudged"
    assert [r["step"] for r in late.spikes] == [r["step"] for r in now.spikes] == [40, 41, 42]
    assert [r["loss"] for r in late.spikes] == [r["loss"] for r in now.spikes]
    assert late.rebaselines == now.rebaselines == [43]
    assert late.ema is not None and now.ema is not None and math.isclose(late.ema, now.ema, rel_tol=1e-12)
    # the host waited for late copies only (never one already done), and held at most MAX_LATE + 1
    assert late.waited and not {s for s in late.waited if delays[s] == 0}
    assert late.max_inflight <= spikes.MAX_LATE + 1
    assert not late._inflight


def test_a_late_spike_still_drops_one_update_under_skip() -> None:
    losses = shifted()
    delays = [1] * len(losses)  # each loss is read one step late
    watch = LateWatch(delays, ema_decay=0.9, warmup_steps=10, on_spike="skip", max_consecutive=3)
    module = run(watch, losses)
    assert [r["step"] for r in watch.spikes] == [40, 41, 42]
    assert module.asked == [r["update_dropped_step"] for r in watch.spikes]
    assert all(s > r["step"] for s, r in zip(module.asked, watch.spikes, strict=True))
    assert watch.dropped == 3


def noisy(n: int, jumps: set[int]) -> list[float]:
    """A loss at 3 with noise σ ≈ 0.02, and a one-step jump to 6 at each step of `jumps`."""
    return [6.0 if i in jumps else 3.0 + 0.02 * math.sin(1.7 * i) for i in range(n)]


def test_spikes_far_apart_never_add_up_to_a_new_level() -> None:
    """max_consecutive=3: four single spikes, 15 steps apart, are four spikes (the counter restarts
    at each ordinary step in between); four in a row are three spikes and a new level."""
    far = SpikeWatch(None, ema_decay=0.9, warmup_steps=10, max_consecutive=3)
    run(far, noisy(100, {30, 45, 60, 75}))
    assert [r["step"] for r in far.spikes] == [30, 45, 60, 75]
    assert far.rebaselines == []
    close = SpikeWatch(None, ema_decay=0.9, warmup_steps=10, max_consecutive=3)
    run(close, noisy(100, {30, 31, 32, 33}))
    assert [r["step"] for r in close.spikes] == [30, 31, 32]
    assert close.rebaselines == [33]
