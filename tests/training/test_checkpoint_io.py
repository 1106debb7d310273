"""Checkpoint files: loaded with weights_only=True (Lightning's resume too), written atomically."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
import torch

import gptlab.training.checkpoint_io as cio
from gptlab.checkpoints.safe_load import CheckpointError, load_checkpoint_file
from gptlab.training.checkpoint_io import AtomicCheckpointIO


def test_everything_lightning_saves_loads_with_weights_only(trained: Path) -> None:
    ckpt = torch.load(trained / "checkpoints" / "last.ckpt", weights_only=True)
    assert isinstance(ckpt["hyper_parameters"], dict) and isinstance(ckpt["hyper_parameters"]["model"], dict)
    assert ckpt["optimizer_states"] and ckpt["lr_schedulers"] and ckpt["loops"] and ckpt["callbacks"]


def test_the_plugin_loads_with_weights_only_whatever_lightning_asks(
    trained: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[object] = []
    real = torch.load

    def spy(*args, **kwargs):
        seen.append(kwargs.get("weights_only"))
        return real(*args, **kwargs)

    monkeypatch.setattr(cio.torch, "load", spy)
    AtomicCheckpointIO().load_checkpoint(trained / "checkpoints" / "last.ckpt", weights_only=False)
    assert seen == [True]


def test_truncated_file_is_one_line_checkpoint_error(trained: Path, tmp_path: Path) -> None:
    data = (trained / "checkpoints" / "last.ckpt").read_bytes()
    bad = tmp_path / "truncated.ckpt"
    bad.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError) as info:
        load_checkpoint_file(bad)
    assert "\n" not in str(info.value)
    assert "is truncated or corrupted: its zip archive has no central directory" in str(info.value)


def test_pickled_objects_are_refused_with_the_reason(tmp_path: Path) -> None:
    path = tmp_path / "objects.ckpt"
    torch.save({"state_dict": {}, "args": argparse.Namespace(lr=1.0)}, path)
    with pytest.raises(CheckpointError, match=r"weights_only=True refuses .*argparse\.Namespace"):
        load_checkpoint_file(path)


def test_interrupted_write_leaves_the_previous_file_loadable(
    trained: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    good = torch.load(trained / "checkpoints" / "last.ckpt", weights_only=True)
    io = AtomicCheckpointIO()
    target = tmp_path / "checkpoints" / "last.ckpt"
    io.save_checkpoint(good, target)
    real_save = torch.save

    def dies_half_way(obj, f, *args, **kwargs):
        real_save({"partial": torch.zeros(1000)}, f)  # some bytes reach the file, then the write fails
        raise OSError("No space left on device")

    monkeypatch.setattr(cio.torch, "save", dies_half_way)
    newer = {**good, "global_step": good["global_step"] + 1}
    with pytest.raises(OSError, match="No space left"):
        io.save_checkpoint(newer, target)
    monkeypatch.undo()
    reloaded = load_checkpoint_file(target)
    assert reloaded["global_step"] == good["global_step"]
    assert sorted(p.name for p in target.parent.iterdir()) == ["last.ckpt"]  # no temp file left over
