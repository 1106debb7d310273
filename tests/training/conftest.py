"""Fixtures of the reliability tests: a shared token cache and clean global state around each test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch


@pytest.fixture(scope="session")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One token cache for all reliability runs: the corpus is tokenized once."""
    return tmp_path_factory.mktemp("rel-token-cache")


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No wandb, and torch's deterministic mode (set by trainer.deterministic) undone afterwards."""
    monkeypatch.setenv("WANDB_MODE", "disabled")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    deterministic = torch.are_deterministic_algorithms_enabled()
    yield
    torch.use_deterministic_algorithms(deterministic)


@pytest.fixture(scope="session")
def trained(tmp_path_factory: pytest.TempPathFactory, cache: Path) -> Path:
    """A finished 2-step tiny run (checkpoints/last.ckpt), shared by the checkpoint tests."""
    from tests.training.rel_harness import train_here

    run = tmp_path_factory.mktemp("trained")
    train_here(run, cache, "trainer.max_steps=2", "trainer.val_check_interval=2")
    return run
