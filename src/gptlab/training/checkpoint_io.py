"""Checkpoint files: written atomically, read with weights_only=True and clear errors."""

from __future__ import annotations

import os
import pickle
import zipfile
from pathlib import Path
from typing import Any

import torch
from lightning.fabric.utilities.cloud_io import get_filesystem
from lightning.pytorch.plugins.io import TorchCheckpointIO


class CheckpointError(ValueError):
    """A checkpoint file that cannot be used, with the reason in one line."""


def load_checkpoint_file(path: str | os.PathLike, map_location: Any = "cpu") -> dict[str, Any]:
    """torch.load with weights_only=True: nothing in the file can execute code."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"ckpt_path={str(path)!r} does not exist")
    if path.is_dir():
        raise CheckpointError(
            f"ckpt_path={str(path)!r} is a directory (a sharded FSDP checkpoint?); "
            "consolidate it with `python scripts/consolidate.py` or pass it to train.py to resume"
        )
    try:
        return torch.load(path, map_location=map_location, weights_only=True)
    except (RuntimeError, EOFError, pickle.UnpicklingError, zipfile.BadZipFile, OSError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise CheckpointError(
            f"ckpt_path={str(path)!r} is not a readable checkpoint (truncated or corrupted?): {first}"
        ) from None


class AtomicCheckpointIO(TorchCheckpointIO):
    """Write to a temporary name and rename, so an interrupted write leaves the old file intact."""

    def save_checkpoint(self, checkpoint: dict[str, Any], path: Any, storage_options: Any = None) -> None:
        path = Path(path)
        fs = get_filesystem(str(path))
        fs.makedirs(str(path.parent), exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        with open(tmp, "wb") as f:
            torch.save(checkpoint, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)

    def load_checkpoint(self, path: Any, map_location: Any = None, weights_only: bool | None = None) -> dict:
        return load_checkpoint_file(path, map_location=map_location or "cpu")
