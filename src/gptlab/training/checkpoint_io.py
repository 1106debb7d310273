"""What training needs of checkpoint files: an atomic write, and a resume refused in one line.

Reading is gptlab.checkpoints.safe_load's (weights_only=True, one-line errors), used here too.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from lightning.fabric.utilities.cloud_io import get_filesystem
from lightning.pytorch.plugins.io import TorchCheckpointIO

from gptlab.checkpoints.safe_load import CheckpointError, load_checkpoint_file

# Model fields a resumed run may change: they do not alter the trained network's function.
RESUMABLE_CHANGES = (
    "dropout",
    "init_std",
    "depth_scaled_init",
    "init_from",
    "activation_checkpointing",
    "activation_checkpointing_every",
)


def check_same_optimizer(checkpoint: Mapping[str, Any], name: str, where: str) -> None:
    """Refuse a checkpoint whose optimizer state is another optimizer's (optim.name), in one line:
    otherwise torch's load_state_dict fails on the number of parameter groups."""
    saved = ((checkpoint.get("hyper_parameters") or {}).get("optim") or {}).get("name", "adamw")
    if saved != name:
        raise CheckpointError(
            f"{where} was trained with optim.name={saved} but optim.name={name} now: its "
            f"optimizer state is {saved}'s; resume with optim={saved}, or start a new run"
        )


def check_resumable(checkpoint: Mapping[str, Any], module: torch.nn.Module, where: str) -> None:
    """Refuse, in one line, a checkpoint whose network differs from the module about to resume it.

    Runs in the LightningModule's on_load_checkpoint, before Lightning's strict load_state_dict
    (whose error is a many-line traceback). Compares the saved model hyper-parameters and the
    tensor names and shapes.
    """
    state = checkpoint.get("state_dict")
    if not isinstance(state, Mapping):
        raise CheckpointError(
            f"{where} has no 'state_dict' (keys found: {sorted(checkpoint)[:8]}); "
            "train.py resumes only from the .ckpt files it writes"
        )
    saved = (checkpoint.get("hyper_parameters") or {}).get("model") or {}
    now = (getattr(module, "hparams", {}) or {}).get("model") or {}
    # a field added after the checkpoint was written (e.g. qk_norm) counts at its default there
    from gptlab.model.config import GPTConfig

    saved = {**{k: v for k, v in GPTConfig().to_dict().items() if k in now}, **saved}
    differ = [
        f"model.{k}={saved.get(k)!r} in the checkpoint but {now.get(k)!r} now"
        for k in sorted(set(saved) | set(now))
        if k not in RESUMABLE_CHANGES and saved.get(k) != now.get(k)
    ]

    def shapes(sd: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
        return {k.replace("_orig_mod.", ""): tuple(v.shape) for k, v in sd.items() if hasattr(v, "shape")}

    have, want = shapes(state), shapes(module.state_dict())
    problems = differ[:3]
    if not problems:
        missing = sorted(set(want) - set(have))
        extra = sorted(set(have) - set(want))
        wrong = [f"{k} {have[k]} vs {want[k]}" for k in sorted(set(want) & set(have)) if have[k] != want[k]]
        problems += [f"missing {missing[:3]}"] if missing else []
        problems += [f"unexpected {extra[:3]}"] if extra else []
        problems += [f"shape {wrong[0]}"] if wrong else []
    if problems:
        raise CheckpointError(
            f"{where} was trained with another model: {'; '.join(problems)}; resume with the "
            "model.* settings it was trained with (its .hydra/config.yaml), or start a new run"
        )


class AtomicCheckpointIO(TorchCheckpointIO):
    """Write to a temporary name and rename, so an interrupted write leaves the old file intact."""

    def save_checkpoint(self, checkpoint: dict[str, Any], path: Any, storage_options: Any = None) -> None:
        path = Path(path)
        fs = get_filesystem(str(path))
        fs.makedirs(str(path.parent), exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        try:
            with open(tmp, "wb") as f:
                torch.save(checkpoint, f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)  # the old file at `path` was never touched
            raise
        try:  # make the rename itself durable (a crash right after it keeps the new name)
            fd = os.open(path.parent, os.O_RDONLY)
        except OSError:
            return
        try:
            os.fsync(fd)
        except OSError:
            pass
        finally:
            os.close(fd)

    def load_checkpoint(self, path: Any, map_location: Any = None, weights_only: bool | None = None) -> dict:
        """Always weights_only=True, whatever Lightning asks: checkpoints are data, not code."""
        checkpoint = load_checkpoint_file(path, map_location=map_location or "cpu")
        missing = [k for k in ("state_dict", "pytorch-lightning_version") if k not in checkpoint]
        if missing:
            raise CheckpointError(
                f"ckpt_path={str(path)!r} is not a Lightning checkpoint of train.py (no {missing}; keys "
                f"found: {sorted(checkpoint)[:8]}); train.py resumes from the checkpoints/*.ckpt it writes"
            )
        return checkpoint
