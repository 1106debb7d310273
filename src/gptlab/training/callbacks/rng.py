"""RNG states in checkpoints, so a resumed run draws the same dropout masks as an uninterrupted one.

Lightning saves model, optimizer, schedule and loop counters but no random-number-generator state.
This callback adds torch (CPU and CUDA), numpy and Python `random` states to every checkpoint, in a
form `torch.load(weights_only=True)` accepts (tensors, ints, tuples), and restores them just before
the first training step after a resume. Two things would otherwise shift the stream:

- validation draws from the torch generator (every DataLoader iterator takes a seed from it), and a
  resumed run skips the validation that followed the saved step: validation therefore runs on a
  forked state that is put back afterwards, in every run;
- a resumed run creates its train iterator (one more draw) after the checkpoint was loaded: the
  saved state is therefore applied at the first training batch, after the iterator exists.
"""

from __future__ import annotations

import logging
import random
from typing import Any

import lightning as L
import numpy as np
import torch

log = logging.getLogger(__name__)


def capture_rng() -> dict[str, Any]:
    """The process's RNG states, as tensors/ints/tuples only (loadable with weights_only=True)."""
    kind, keys, pos, has_gauss, cached = np.random.get_state(legacy=True)
    version, internal, gauss_next = random.getstate()
    state: dict[str, Any] = {
        "torch": torch.get_rng_state(),
        "numpy": (
            str(kind),
            torch.from_numpy(keys.astype(np.int64)),
            int(pos),
            int(has_gauss),
            float(cached),
        ),
        "python": (int(version), tuple(int(v) for v in internal), gauss_next),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng(state: dict[str, Any]) -> None:
    """Put back what capture_rng returned (CUDA states only when the device count matches)."""
    torch.set_rng_state(state["torch"])
    kind, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((kind, keys.numpy().astype(np.uint32), pos, has_gauss, cached))
    version, internal, gauss_next = state["python"]
    random.setstate((version, tuple(internal), gauss_next))
    cuda = state.get("cuda")
    if cuda is not None and torch.cuda.is_available():
        if len(cuda) == torch.cuda.device_count():
            torch.cuda.set_rng_state_all(cuda)
        else:
            log.warning(
                "checkpoint has CUDA RNG states for %d devices, this machine %d: CUDA RNG not restored",
                len(cuda),
                torch.cuda.device_count(),
            )


class RNGStateCheckpoint(L.Callback):
    """Saves RNG states with every checkpoint and restores them at the first resumed training step."""

    def __init__(self) -> None:
        self._pending: dict[str, Any] | None = None  # loaded from a checkpoint, not applied yet
        self._before_val: dict[str, Any] | None = None  # the training stream while validation runs

    def state_dict(self) -> dict[str, Any]:
        """What goes into checkpoint['callbacks']: the training stream's state, even mid-validation."""
        if self._pending is not None:  # saved before the first resumed step: keep what was loaded
            return self._pending
        return self._before_val if self._before_val is not None else capture_rng()

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Hold the states until the train iterator exists (see the module docstring)."""
        self._pending = dict(state_dict) if state_dict else None

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: Any, batch: Any, batch_idx: int) -> None:
        if self._pending is not None:
            restore_rng(self._pending)
            self._pending = None

    def on_validation_start(self, trainer: L.Trainer, pl_module: Any) -> None:
        self._before_val = capture_rng()

    def on_validation_end(self, trainer: L.Trainer, pl_module: Any) -> None:
        if self._before_val is not None:
            restore_rng(self._before_val)
            self._before_val = None
