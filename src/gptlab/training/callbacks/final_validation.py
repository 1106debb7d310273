"""Every run ends with a validation, also when max_steps is not a multiple of val_check_interval.

At the last optimizer step this sets `trainer.should_stop`; Lightning's training loop then runs its
validation for that batch (the path early stopping takes), inside fit: ModelCheckpoint, the loggers
and metrics.json see it like any other validation. A step that validates anyway validates once.
"""

from __future__ import annotations

from typing import Any

import lightning as L


class FinalValidation(L.Callback):
    """Requests a validation after the final optimizer step of the run."""

    def on_train_batch_end(
        self, trainer: L.Trainer, pl_module: Any, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        if 0 < trainer.max_steps <= trainer.global_step:
            trainer.should_stop = True
