"""RNG states in checkpoints, so a resumed run draws the same dropout masks as an uninterrupted one.

Lightning saves model, optimizer, schedule and loop counters but no random-number-generator state.
This callback adds torch (CPU and this rank's CUDA device), numpy and Python `random` states to every
checkpoint, in a form `torch.load(weights_only=True)` accepts (tensors, ints, floats, tuples, lists),
and restores them just before the first training step after a resume. Three things would otherwise
shift the stream:

- a checkpoint is written by rank 0 alone (DDP's file, FSDP2's `meta.pt`), but every rank has its own
  generators: all ranks' states are gathered (all_gather_object) when the checkpoint is built (every
  rank builds it; `Trainer.save_checkpoint` is a collective anyway), saved as a list indexed by
  global rank, and each rank restores its own entry;
- validation draws from the torch generator (every DataLoader iterator takes a seed from it), and a
  resumed run skips the validation that followed the saved step: validation therefore runs on a
  forked state that is put back afterwards, in every run. The fork is the state at the end of the
  training batch: Lightning creates the val iterator (its draw) before on_validation_start, so a
  checkpoint saved between the step and its validation (a trunk's branch point) holds the state the
  next training step sees;
- a resumed run creates its train iterator (one more draw) after the checkpoint was loaded: the
  saved state is therefore applied at the first training batch, after the iterator exists.

Lightning's own `_collect_rng_states` does not fit: it keeps numpy's state as an ndarray (refused by
weights_only=True) and takes `get_rng_state_all()`, every device's state seen from one process.
"""

from __future__ import annotations

import logging
import random
from typing import Any

import lightning as L
import numpy as np
import torch
import torch.distributed as dist

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
        state["cuda"] = torch.cuda.get_rng_state(torch.cuda.current_device())  # this rank's device
    return state


def restore_rng(state: dict[str, Any]) -> None:
    """Put back what capture_rng returned (the CUDA state onto this process's current device)."""
    torch.set_rng_state(state["torch"])
    kind, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((kind, keys.numpy().astype(np.uint32), pos, has_gauss, cached))
    version, internal, gauss_next = state["python"]
    random.setstate((version, tuple(internal), gauss_next))
    cuda = state.get("cuda")
    if cuda is None or not torch.cuda.is_available():
        return
    device = torch.cuda.current_device()
    if isinstance(cuda, (list, tuple)):  # checkpoints before per-rank states: get_rng_state_all()
        if len(cuda) != torch.cuda.device_count():
            log.warning("checkpoint's CUDA RNG states are for another device count: CUDA RNG not restored")
            return
        cuda = cuda[device]
    torch.cuda.set_rng_state(cuda, device)


def gather_states(state: dict[str, Any], world_size: int) -> list[dict[str, Any]]:
    """Every rank's `state`, indexed by global rank (called on all ranks: a collective)."""
    if world_size == 1 or not (dist.is_available() and dist.is_initialized()):
        return [state]
    states: list[Any] = [None] * world_size
    dist.all_gather_object(states, state)
    return states


def _ranks(first: int, last: int) -> str:
    return f"rank {first}" if first == last else f"ranks {first}-{last}"


def own_state(saved: dict[str, Any], rank: int, world_size: int) -> dict[str, Any] | None:
    """This rank's entry of a saved state (None if the checkpoint has none for it); rank 0 warns
    in one line when the checkpoint was written by another number of ranks."""
    states = saved.get("ranks", [saved])  # a flat dict: a checkpoint from before per-rank states
    n = len(states)
    if n != world_size and rank == 0:
        if world_size > n:
            rest = f"{_ranks(n, world_size - 1)} keep the seeded state"
        else:
            rest = f"the states of {_ranks(world_size, n - 1)} are not used"
        common = _ranks(0, min(n, world_size) - 1)
        log.warning(
            "checkpoint holds RNG states of %d rank(s), this run has %d: %s restore their own, %s",
            n,
            world_size,
            common,
            rest,
        )
    return dict(states[rank]) if rank < n else None


class RNGStateCheckpoint(L.Callback):
    """Saves every rank's RNG states with each checkpoint; each rank restores its own at the first
    resumed training step."""

    def __init__(self) -> None:
        self._rank, self._world_size = 0, 1
        self._pending: dict[str, Any] | None = None  # this rank's loaded state, not applied yet
        self._before_val: dict[str, Any] | None = None  # the training stream while validation runs
        self._after_step: torch.Tensor | None = None  # torch's CPU state as the last training batch ended

    def setup(self, trainer: L.Trainer, pl_module: Any, stage: str) -> None:
        """Lightning calls this before it restores a checkpoint: the rank is known at load time."""
        self._rank, self._world_size = int(trainer.global_rank), int(trainer.world_size)

    def state_dict(self) -> dict[str, Any]:
        """What goes into checkpoint['callbacks']: every rank's training stream, even mid-validation."""
        if self._pending is not None:  # saved before the first resumed step: keep what was loaded
            own = self._pending
        else:
            own = self._before_val if self._before_val is not None else capture_rng()
        return {"ranks": gather_states(own, self._world_size)}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Hold this rank's states until the train iterator exists (see the module docstring)."""
        self._pending = own_state(state_dict, self._rank, self._world_size) if state_dict else None

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: Any, batch: Any, batch_idx: int) -> None:
        if self._pending is not None:
            restore_rng(self._pending)
            self._pending = None

    def on_train_batch_end(
        self, trainer: L.Trainer, pl_module: Any, outputs: Any, batch: Any, i: int
    ) -> None:
        # before a validation's iterator draws (see the docstring); that draw takes torch's CPU
        # generator only, so only its state is kept on every step (a 5 kB copy)
        self._after_step = torch.get_rng_state()

    def on_validation_start(self, trainer: L.Trainer, pl_module: Any) -> None:
        self._before_val = capture_rng()
        if self._after_step is not None:
            self._before_val["torch"], self._after_step = self._after_step, None

    def on_validation_end(self, trainer: L.Trainer, pl_module: Any) -> None:
        if self._before_val is not None:
            restore_rng(self._before_val)
            self._before_val = None
