"""Task-scoring fixtures: one intra-op thread (tiny models on a shared machine) and a real checkpoint."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from gptlab.model import GPTConfig
from tests.interop.helpers import TINY, train_lightning_checkpoint


@pytest.fixture(autouse=True)
def _one_torch_thread() -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def byte_ckpt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Lightning checkpoint of a tiny Llama-shaped GPT trained for two steps on bytes."""
    path = tmp_path_factory.mktemp("task_ckpt") / "last.ckpt"
    return train_lightning_checkpoint(path, GPTConfig(**TINY), {"name": "byte"})
