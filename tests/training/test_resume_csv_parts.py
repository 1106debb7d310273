"""csv/metrics.csv across resumes that re-run steps, and across more than one resume (issue 37, §6).

The oracle is plain: the rows read back with the csv module, keyed by step, against the steps a loop
`for step in range(max_steps)` runs. A crash (not a SIGTERM, which checkpoints the step it stops at)
leaves last.ckpt at the last validation, so the resumed run re-runs the steps after it: each must be
in metrics.csv once, as the resumed run logged it. Each attempt's own file is kept as
metrics.part-N.csv, one per resume: N = 0 the first attempt's, N = 1 the second's.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import lightning as L
import pytest

from tests.training.rel_harness import train_here, with_callbacks

COMMON = ["model.n_layer=2", "trainer.log_every_n_steps=1", "logger=csv", "seed=5"]


def loss_rows(path: Path) -> list[tuple[int, str]]:
    """(step, train/loss) of every row that holds a training loss, in file order (repeats kept)."""
    with path.open(newline="") as f:
        return [(int(r["step"]), r["train/loss"]) for r in csv.DictReader(f) if r.get("train/loss")]


class Crash(L.Callback):
    """Raises at the end of step `at` (global_step == at), as a failing node would end the run."""

    def __init__(self, at: int) -> None:
        self.at = at

    def on_train_batch_end(self, trainer: L.Trainer, *args: Any) -> None:
        if trainer.global_step == self.at:
            raise RuntimeError("crash for the test")


def test_steps_run_again_after_a_crash_are_in_the_csv_once_as_the_resumed_run_logged_them(
    tmp_path: Path, cache: Path
) -> None:
    run, ckpt = tmp_path / "run", tmp_path / "run" / "checkpoints" / "last.ckpt"
    common = [*COMMON, "trainer.val_check_interval=3", "trainer.max_steps=9"]
    with pytest.MonkeyPatch.context() as mp:
        with_callbacks(mp, Crash(at=6))  # steps 0..4 logged (5's row not yet); last.ckpt after step 2
        with pytest.raises(RuntimeError, match="crash for the test"):
            train_here(run, cache, *common)
    first = loss_rows(run / "csv" / "metrics.csv")
    assert [s for s, _ in first] == list(range(5))
    train_here(run, cache, *common, f"ckpt_path={ckpt}")

    assert loss_rows(run / "csv" / "metrics.part-0.csv") == first  # the crashed attempt, as it was
    whole = loss_rows(run / "csv" / "metrics.csv")
    assert [s for s, _ in whole] == list(range(9))  # each step once, in order: 3 and 4 not twice
    assert whole[:5] == first  # re-run from the step-3 state, steps 3 and 4 log the same losses again


def test_every_resume_keeps_the_attempt_before_it_as_its_own_part_file(tmp_path: Path, cache: Path) -> None:
    run, ckpt = tmp_path / "run", tmp_path / "run" / "checkpoints" / "last.ckpt"
    common = [*COMMON, "trainer.val_check_interval=1000"]
    for attempt, steps in enumerate((3, 6, 9)):
        resume = [f"ckpt_path={ckpt}"] if attempt else []
        train_here(run, cache, *common, f"trainer.max_steps={steps}", *resume)
    parts = sorted(p.name for p in (run / "csv").glob("metrics.part-*.csv"))
    assert parts == ["metrics.part-0.csv", "metrics.part-1.csv"]
    steps_in = {name: [s for s, _ in loss_rows(run / "csv" / name)] for name in [*parts, "metrics.csv"]}
    assert steps_in == {
        "metrics.part-0.csv": list(range(3)),  # the first attempt's file, not overwritten at the 2nd resume
        "metrics.part-1.csv": list(range(6)),
        "metrics.csv": list(range(9)),
    }
