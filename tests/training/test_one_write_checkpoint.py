"""One checkpoint write per save (issue 43, item 2): an improving validation used to write best.ckpt
and last.ckpt in full, one after the other (two torch.save + fsync of the same checkpoint). Now
best.ckpt is written and last.ckpt is a hard link to it; a save without a new best writes last.ckpt
alone. The writes are counted on the real AtomicCheckpointIO of a real (tiny) train.py run; the
oracle for what each file holds is the run's own log: the step of every save and the best val/loss.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import torch

from gptlab.training.checkpoint_io import AtomicCheckpointIO
from tests.training.rel_harness import series, train_here


def test_an_improving_validation_writes_one_file_and_last_links_it(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writes: list[tuple[int, str]] = []
    save = AtomicCheckpointIO.save_checkpoint

    def counted(self: Any, checkpoint: dict, path: Any, storage_options: Any = None) -> None:
        writes.append((int(checkpoint["global_step"]), Path(path).name))
        save(self, checkpoint, path, storage_options)

    monkeypatch.setattr(AtomicCheckpointIO, "save_checkpoint", counted)
    run = tmp_path / "run"
    train_here(
        run,
        cache,
        "trainer.max_steps=12",
        "trainer.val_check_interval=4",
        "callbacks.checkpoint_every_n_steps=2",
    )
    val = series(run, "val/loss")
    ckpt = run / "checkpoints"
    by_step: dict[int, list[str]] = {}
    for step, name in writes:
        by_step.setdefault(step, []).append(name)
    assert all(len(names) == 1 for names in by_step.values()), by_step  # one full write per save
    best, last = (
        torch.load(ckpt / "best.ckpt", weights_only=True),
        torch.load(ckpt / "last.ckpt", weights_only=True),
    )
    assert last["global_step"] == max(by_step) == 12
    # saves every 2 steps from the first validation (step 4) on: new bests at 4, 10 and 12 (the
    # monitored val/loss falls at each validation), last.ckpt alone at 6 and 8
    assert sorted(by_step) == [4, 6, 8, 10, 12]
    assert best["global_step"] == max(s for s, names in by_step.items() if names == ["best.ckpt"])
    state = next(v for k, v in best["callbacks"].items() if k.startswith("OneWriteCheckpoint"))
    assert float(state["best_model_score"]) == pytest.approx(min(val.values()), rel=1e-6)
    if by_step[12] == ["best.ckpt"]:  # the last save was a new best: one file, two names
        assert os.path.samefile(ckpt / "best.ckpt", ckpt / "last.ckpt")
        assert str(state["last_model_path"]).endswith("last.ckpt")
    assert not list(ckpt.glob(".*"))  # no temporary name left behind
