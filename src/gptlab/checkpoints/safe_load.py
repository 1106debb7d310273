"""Reading a checkpoint file safely: torch.load(weights_only=True), and a one-line reason on failure.

Nothing in a checkpoint can execute code; a truncated, foreign or object-holding file is named
with what is wrong with it instead of torch's many-line advice.
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path
from typing import Any

import torch

from gptlab.export.weights import first_line, weights_only_refusal


class CheckpointError(ValueError):
    """A checkpoint file that cannot be used, with the reason in one line."""


def _load_reason(err: BaseException) -> str:
    """The informative line of a torch.load failure (weights_only errors open with generic advice)."""
    refused = weights_only_refusal(err)
    if refused is None:
        return first_line(err)
    return f"it holds Python objects that weights_only=True refuses to load ({refused})"


def _check_container(path: Path) -> None:
    """torch.save writes a zip archive (or, before torch 1.6, a pickle): say which one is broken."""
    with open(path, "rb") as f:
        head = f.read(4)
    if head.startswith(b"PK"):
        if not zipfile.is_zipfile(path):
            raise CheckpointError(
                f"ckpt_path={str(path)!r} is truncated or corrupted: its zip archive has no central "
                f"directory ({path.stat().st_size} bytes; an interrupted write or copy?)"
            )
    elif not head.startswith(b"\x80"):
        raise CheckpointError(
            f"ckpt_path={str(path)!r} is not a checkpoint: torch.save files are zip archives "
            f"(or legacy pickles), this file starts with {head!r}"
        )


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
    _check_container(path)
    try:
        loaded = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as err:  # noqa: BLE001 - any unreadable file is the user's input, said in one line
        reason = _load_reason(err)
        what = "cannot be loaded safely" if "weights_only" in reason else "is not a readable checkpoint"
        if "weights_only" not in reason:
            what += " (truncated or corrupted?)"
        raise CheckpointError(f"ckpt_path={str(path)!r} {what}: {reason}") from None
    if not isinstance(loaded, dict):
        raise CheckpointError(
            f"ckpt_path={str(path)!r} holds a {type(loaded).__name__}, not a checkpoint dict"
        )
    return loaded
