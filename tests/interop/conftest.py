"""Interop fixtures: one real Lightning checkpoint of a tiny GPT, shared by the session."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from gptlab.model import GPTConfig
from tests.interop.helpers import TINY, train_lightning_checkpoint


@pytest.fixture(scope="session")
def byte_ckpt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Lightning checkpoint of a tiny Llama-shaped GPT trained for two steps on bytes."""
    path = tmp_path_factory.mktemp("byte_ckpt") / "last.ckpt"
    return train_lightning_checkpoint(path, GPTConfig(**TINY), {"name": "byte"})


@pytest.fixture(autouse=True)
def _one_torch_thread() -> Iterator[None]:
    """One intra-op thread: these models are tiny, and on a shared 2-core machine two OpenMP
    threads spin-wait on each other (measured: 0.6 s per tiny forward instead of 1 ms)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
