"""Preemption: on SIGTERM, save checkpoints/last.ckpt at the next step boundary and exit cleanly.

Lightning 2.6 installs a SIGTERM handler when fit starts: it only sets `trainer.received_sigterm`
(under DDP rank 0 broadcasts it), and the loops raise `SIGTERMException` (a `SystemExit`) after the
current training batch has finished (or between validation batches). Lightning then calls every
callback's `on_exception`: this one writes `last.ckpt` there, so the saved state is that of a finished
optimizer step and a resumed run (`ckpt_path=<run>/checkpoints/last.ckpt`) continues at the next step.
Under SLURM with `SLURMEnvironment(auto_requeue=True)`, Lightning's own SIGUSR1 handler saves an
`hpc_ckpt_*.ckpt` and requeues the job; the SIGTERM that follows ends up here as well.

The app turns the exception into metrics.json status "preempted" and exit code EXIT_PREEMPTED (143,
what a shell reports for a process ended by SIGTERM), so no script mistakes a preempted run for a
finished one. A SIGTERM that arrives before fit starts (data preparation) still kills the process at
once: there is no training state to save yet.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import lightning as L
from lightning.pytorch.utilities.exceptions import SIGTERMException

log = logging.getLogger(__name__)
EXIT_PREEMPTED = 143  # 128 + SIGTERM


class PreemptionCheckpoint(L.Callback):
    """Writes `<dirpath>/last.ckpt` when Lightning stops the fit because of SIGTERM, and at the end of
    training when the last regular checkpoint (taken at validation) is older than the final step."""

    def __init__(self, dirpath: str | Path, filename: str = "last.ckpt") -> None:
        self.path = Path(dirpath) / filename
        self.saved_step: int | None = None

    def on_exception(self, trainer: L.Trainer, pl_module: Any, exception: BaseException) -> None:
        if not isinstance(exception, SIGTERMException):
            return  # other failures may leave a half-done step: keep the last regular checkpoint
        trainer.save_checkpoint(self.path, weights_only=False)  # every rank: a collective under FSDP
        self.saved_step = trainer.global_step
        if trainer.is_global_zero:
            log.warning(
                "preempted (SIGTERM) after %d optimizer steps: saved %s; resume with ckpt_path=%s",
                trainer.global_step,
                self.path,
                self.path,
            )

    def on_train_end(self, trainer: L.Trainer, pl_module: Any) -> None:
        regular = trainer.checkpoint_callback
        if getattr(regular, "_last_global_step_saved", None) == trainer.global_step:
            return  # ModelCheckpoint already wrote this step
        trainer.save_checkpoint(self.path, weights_only=False)  # every rank: a collective under FSDP
