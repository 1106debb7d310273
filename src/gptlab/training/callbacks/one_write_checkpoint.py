"""ModelCheckpoint that writes one file per save: last.ckpt is a hard link to best.ckpt when the
best was written at this very step.

Lightning's ModelCheckpoint (save_top_k=1, save_last=True) writes an improving validation twice:
best.ckpt, then last.ckpt, each a full torch.save and fsync (1.49 GB at GPT-2 124M with AdamW state).
The two files hold the same checkpoint, so here last.ckpt becomes a second name of best.ckpt's file
(`os.link` to a temporary name, then `os.replace`: the old last.ckpt stays whole until the new name
is in place). Each later write replaces its name with a new file (AtomicCheckpointIO's rename), so
neither name ever changes the other's content. Lightning's own `save_last="link"` is not used: it
links last.ckpt to the last top-k file even when that file is from an earlier step (a stale resume).
Where a hard link cannot be made (a sharded checkpoint directory, a filesystem without hard links),
last.ckpt is written in full, as before.
"""

from __future__ import annotations

import os
from typing import Any

import lightning as L
from lightning.pytorch.callbacks import ModelCheckpoint


class OneWriteCheckpoint(ModelCheckpoint):
    """ModelCheckpoint whose last.ckpt is best.ckpt's file when both are due at one step."""

    def _save_topk_checkpoint(self, trainer: L.Trainer, monitor_candidates: dict[str, Any]) -> None:
        if self.save_last:  # best.ckpt then records last.ckpt's path, as last.ckpt itself would
            self.last_model_path = self.format_checkpoint_name(monitor_candidates, self.CHECKPOINT_NAME_LAST)
        super()._save_topk_checkpoint(trainer, monitor_candidates)

    def _save_last_checkpoint(self, trainer: L.Trainer, monitor_candidates: dict[str, Any]) -> None:
        best = self.best_model_path
        fresh = (
            self.save_last is True
            and best
            and self._last_checkpoint_saved == best
            and self._last_global_step_saved == trainer.global_step
            and os.path.isfile(best)
        )
        if fresh:
            last = self.format_checkpoint_name(monitor_candidates, self.CHECKPOINT_NAME_LAST)
            if last != best and link_atomic(trainer, best, last):
                self.last_model_path = last
                return
        super()._save_last_checkpoint(trainer, monitor_candidates)


def link_atomic(trainer: L.Trainer, target: str, name: str) -> bool:
    """`name` becomes a hard link to `target`'s file, atomically (rank 0; every rank waits). False
    where the filesystem refuses hard links: the caller writes the file instead."""
    ok = True
    if trainer.is_global_zero:
        tmp = os.path.join(os.path.dirname(name), f".{os.path.basename(name)}.link")
        try:
            if os.path.lexists(tmp):
                os.remove(tmp)
            os.link(target, tmp)
            os.replace(tmp, name)
        except OSError:
            ok = False
    ok = bool(trainer.strategy.broadcast(ok))
    trainer.strategy.barrier()
    return ok
