"""In-process training for the reliability tests: one import of torch/Lightning for many short runs.

`train_here` runs `gptlab.training.app.train` on a config composed exactly as train.py composes it,
so what it exercises is the CLI's code path minus process start-up and run_job's exit handling
(which the few subprocess tests cover).
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import lightning as L
import pytest
from omegaconf import DictConfig

from gptlab.compose import compose_raw

REPO = Path(__file__).resolve().parents[2]
CONF = REPO / "conf"
TINY = [
    "model.n_layer=2",
    "model.n_embd=32",
    "model.n_head=2",
    "model.block_size=32",
    "data.batch_size=4",
    "data.max_bytes=60000",
    "data.num_proc=1",
    "trainer.accelerator=cpu",
    "data.val_windows=4",  # 1 batch of 4
    "trainer.log_every_n_steps=1",
    "trainer.enable_progress_bar=false",
    "callbacks.telemetry.figures=false",
    "sample.max_new_tokens=0",
    "logger=csv",
    "callbacks.tasks.names=[]",  # no task in the many tiny runs; tests that want one name it after TINY
]


def compose_cfg(*overrides: str) -> DictConfig:
    """The composed tree exactly as train.py would see it (schema checks included)."""
    return compose_raw(overrides)[0]


def train_here(run_dir: Path, cache: Path, *overrides: str) -> dict[str, Any]:
    """One tiny training run in this process; returns what metrics.json holds."""
    from gptlab.training.app import train, validate

    raw = compose_cfg(*TINY, f"data.cache_dir={cache}", *overrides)
    return train(validate(raw), raw, Path(run_dir))


def with_callbacks(monkeypatch: pytest.MonkeyPatch, *extra: L.Callback) -> None:
    """Make the app's runs use `extra` test-only callbacks after its own."""
    import gptlab.training.app as app

    original = app.build_callbacks
    monkeypatch.setattr(app, "build_callbacks", lambda *a, **k: [*original(*a, **k), *extra])


def csv_rows(run_dir: Path) -> list[dict[str, str]]:
    """The rows of the run's csv/metrics.csv."""
    with open(Path(run_dir) / "csv" / "metrics.csv") as f:
        return list(csv.DictReader(f))


def series(run_dir: Path, name: str) -> dict[int, float]:
    """One metric by step, from the CSV log."""
    return {int(r["step"]): float(r[name]) for r in csv_rows(run_dir) if r.get(name)}
