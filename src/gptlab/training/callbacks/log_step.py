"""The step every logger is given is the optimizer step, after a resume too.

Lightning logs `self.log` values at `fit_loop.epoch_loop._batches_that_stepped` (batches whose
optimizer stepped: with one optimizer and automatic optimization, the number of optimizer steps
taken, i.e. `trainer.global_step` at the start of a batch; a step's values are logged at its 0-based
index). That counter is raised *after* a step's validation, and on a restart Lightning 2.6 corrects
it by its restart stage, read from the batch-progress counters; two kinds of checkpoint get it wrong:

- one written by the final validation that `FinalValidation` requests (`should_stop` at the last
  step, off `val_check_interval`; ModelCheckpoint saves on `on_validation_end`, before the raise):
  nothing adds the missing one, and every metric of the resumed run was logged one step early (its
  first update at the previous run's last step, which then held two losses; the resumed wandb run
  got that step twice);
- one written on SIGTERM (`PreemptionCheckpoint`, after the raise) at a step on the interval: the
  restart replays the skipped validation's batch and counts it again, one step late.

A checkpoint saved at train-batch end, or at a validation on the interval, comes back right.

This callback states the invariant instead of second-guessing Lightning's restart stages: at the
start of every training batch the logging step is `global_step`. It is a no-op on an uninterrupted
run and on every correctly restored checkpoint; it fixes a checkpoint already written (no need to
re-save one). docs/pitfalls.md, Lightning.
"""

from __future__ import annotations

import logging
from typing import Any

import lightning as L

log = logging.getLogger(__name__)


class LogStepIsOptimizerStep(L.Callback):
    """Keeps Lightning's logging step equal to `trainer.global_step` at every training batch start."""

    def __init__(self) -> None:
        self.corrected: list[tuple[int, int]] = []  # (what Lightning had, global_step) when they differed

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: Any, batch: Any, batch_idx: int) -> None:
        if not pl_module.automatic_optimization or len(trainer.optimizers) != 1:
            return  # the counter means something else there; gptlab's module is neither
        loop = trainer.fit_loop.epoch_loop
        if loop._batches_that_stepped == trainer.global_step:
            return
        self.corrected.append((loop._batches_that_stepped, trainer.global_step))
        log.debug(
            "logging step %d restored to the optimizer step %d (Lightning's count after a resume)",
            loop._batches_that_stepped,
            trainer.global_step,
        )
        loop._batches_that_stepped = trainer.global_step
