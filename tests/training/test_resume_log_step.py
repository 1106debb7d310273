"""A resumed run logs every step at the step an uninterrupted run logs it (issue 25, item 11).

The oracle is the uninterrupted run's own CSV log, keyed by step: the resumed run's (step, train/loss,
lr) rows must be those rows, and the step that the first attempt logged last must not be sent to the
loggers again. A recording logger beside the CSV one sees every `log_metrics(step=...)` call, i.e.
exactly what a WandbLogger is handed (it sends `step` as `trainer/global_step`).

Two checkpoints that Lightning 2.6 restores with a wrong logging step (callbacks/log_step.py): the one
the final validation writes (the issue's recipe: 10 steps, then resumed to 20), and the one a SIGTERM
writes at a step on `val_check_interval`.
"""

from __future__ import annotations

import csv
import os
import signal
from pathlib import Path
from typing import Any

import lightning as L
import pytest
from lightning.pytorch.loggers import Logger
from lightning.pytorch.utilities.exceptions import SIGTERMException

from tests.training.rel_harness import csv_rows, train_here, with_callbacks

ISSUE = ["model.n_layer=2", "trainer.log_every_n_steps=1", "logger=csv", "seed=3"]
COLUMNS = ("train/loss", "lr", "tokens_seen")


class Recorder(Logger):
    """Keeps every (step, metric names) that Lightning and telemetry hand the loggers."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[int | None, set[str]]] = []

    @property
    def name(self) -> str:
        return "recorder"

    @property
    def version(self) -> str:
        return "0"

    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None:
        self.calls.append((step, set(metrics)))

    def log_hyperparams(self, *args: Any, **kwargs: Any) -> None:
        pass

    def steps_of(self, name: str) -> list[int | None]:
        return [s for s, keys in self.calls if name in keys]


def recorded(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    """Give the next run a Recorder beside its own loggers."""
    import gptlab.training.app as app

    recorder = Recorder()
    original = app.build_loggers
    monkeypatch.setattr(app, "build_loggers", lambda *a, **k: [*original(*a, **k), recorder])
    return recorder


def rows(path: Path) -> dict[int, tuple[str, ...]]:
    """(train/loss, lr, tokens_seen) by step, as the CSV holds them (the strings: exact)."""
    out: dict[int, tuple[str, ...]] = {}
    with open(path) as f:
        read = list(csv.DictReader(f))
    for r in read:
        if r.get("train/loss"):
            step = int(r["step"])
            assert step not in out, f"step {step} logged twice in {path}"
            out[step] = tuple(r[c] for c in COLUMNS)
    return out


def val_steps(run: Path) -> list[int]:
    return [int(r["step"]) for r in csv_rows(run) if r.get("val/loss")]


def test_resume_after_the_final_validation_logs_each_step_where_the_full_run_does(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run, full = tmp_path / "run", tmp_path / "full"
    common = [*ISSUE, "trainer.val_check_interval=1000"]
    first = recorded(monkeypatch)
    train_here(run, cache, *common, "trainer.max_steps=10")
    monkeypatch.undo()
    second = recorded(monkeypatch)
    train_here(run, cache, *common, "trainer.max_steps=20", f"ckpt_path={run / 'checkpoints' / 'last.ckpt'}")
    monkeypatch.undo()
    train_here(full, cache, *common, "trainer.max_steps=20")

    reference = rows(full / "csv" / "metrics.csv")
    assert sorted(reference) == list(range(20))
    before, whole = rows(run / "csv" / "metrics.part-0.csv"), rows(run / "csv" / "metrics.csv")
    assert before == {s: reference[s] for s in range(10)}  # the first attempt's file, kept as it was
    assert whole == reference  # metrics.csv goes on from it: each step once, where the full run logs it
    assert val_steps(full) == [19]
    assert val_steps(run) == [9, 19]  # the first attempt's final validation (max_steps=10) is history

    # what a wandb run resumed with resume="allow" would be sent: no step of the first attempt again
    sent_first, sent_second = set(first.steps_of("train/loss")), set(second.steps_of("train/loss"))
    assert sent_first == set(range(10)) and sent_second == set(range(10, 20))
    assert min(s for s, _ in second.calls if s is not None) == 10  # telemetry's rows too


class Sigterm(L.Callback):
    """A real SIGTERM to this process at the end of step `at` (Lightning's handler takes it)."""

    def __init__(self, at: int) -> None:
        self.at = at

    def on_train_batch_end(self, trainer: L.Trainer, *args: Any) -> None:
        if trainer.global_step == self.at:
            os.kill(os.getpid(), signal.SIGTERM)


def test_resume_after_a_sigterm_on_a_validation_step_logs_each_step_where_the_full_run_does(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run, full = tmp_path / "run", tmp_path / "full"
    common = [*ISSUE, "trainer.val_check_interval=5", "trainer.max_steps=10"]
    train_here(full, cache, *common)
    with pytest.MonkeyPatch.context() as mp:
        with_callbacks(mp, Sigterm(at=5))
        with pytest.raises(SIGTERMException):
            train_here(run, cache, *common)
    train_here(run, cache, *common, f"ckpt_path={run / 'checkpoints' / 'last.ckpt'}")
    reference = rows(full / "csv" / "metrics.csv")
    assert rows(run / "csv" / "metrics.part-0.csv") == {s: reference[s] for s in range(5)}
    assert rows(run / "csv" / "metrics.csv") == reference  # whole: steps 0..4 kept, 5..9 after the resume
    assert val_steps(run) == val_steps(full) == [4, 9]
