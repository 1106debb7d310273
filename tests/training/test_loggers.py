"""A logger that fails never stops training: wandb.init raising falls back to the CSV with one warning."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import wandb

from tests.training.rel_harness import series, train_here


def test_wandb_init_failure_falls_back_to_csv(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    calls: list[dict] = []

    def broken_init(*args, **kwargs):
        calls.append(kwargs)
        raise wandb.errors.CommError("simulated: wandb service unreachable")

    monkeypatch.setattr(wandb, "init", broken_init)
    with caplog.at_level(logging.WARNING, logger="gptlab.training.loggers"):
        result = train_here(
            tmp_path,
            cache,
            "logger=default",
            "logger.mode=offline",
            "trainer.max_steps=4",
            "trainer.val_check_interval=2",
        )
    assert calls, "the test must reach wandb.init"
    warnings = [r for r in caplog.records if r.name == "gptlab.training.loggers"]
    assert len(warnings) == 1 and "metrics go to the CSV log only" in warnings[0].getMessage()
    assert result["status"] == "finished" and result["steps"] == 4
    assert sorted(series(tmp_path, "train/loss")) == [0, 1, 2, 3]
    assert sorted(series(tmp_path, "val/loss")) == [1, 3]
    assert series(tmp_path, "grad_norm/total") and series(tmp_path, "lr")
