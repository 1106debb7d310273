"""Shared fixtures: a small multilingual corpus on disk and configs that cache under tmp_path."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import datasets
import pytest

from gptlab.data.config import DataConfig

# Documents with multi-byte characters, blank lines and code, so round trips test real UTF-8.
DOCS = [
    "def add(a, b):\n    return a + b\n",
    "Grüße aus Köln — ça va? 日本語のテキスト 🙂\n\nSecond paragraph.\n",
    "The quick brown fox jumps over the lazy dog. " * 20,
    "class Stack:\n    def __init__(self):\n        self.items = []\n" * 5,
    "Lorem ipsum dolor sit amet, consectetur adipiscing elit.\n" * 15,
    "αβγδε ζηθ ικλμν — Ελληνικά\n" * 10,
    "import os\nprint(os.getcwd())\n" * 8,
    "tail document without trailing newline",
]


@pytest.fixture(autouse=True, scope="session")
def _quiet_datasets() -> None:
    datasets.disable_progress_bars()


@pytest.fixture
def docs() -> list[str]:
    """The corpus documents, in the order sources must return them."""
    return list(DOCS)


@pytest.fixture
def corpus_dir(tmp_path: Path) -> Path:
    """DOCS written as doc00.txt … doc07.txt (sorted name order = DOCS order)."""
    d = tmp_path / "corpus"
    d.mkdir()
    for i, text in enumerate(DOCS):
        (d / f"doc{i:02d}.txt").write_text(text, encoding="utf-8")
    return d


@pytest.fixture
def make_cfg(tmp_path: Path) -> Callable[..., DataConfig]:
    """DataConfig factory whose cache lives in tmp_path (tests never share cached tokens)."""

    def make(**overrides: object) -> DataConfig:
        fields: dict[str, object] = {"cache_dir": str(tmp_path / "cache"), "num_proc": 1}
        fields.update(overrides)
        return DataConfig(**fields)  # type: ignore[arg-type]

    return make


@pytest.fixture
def text_cfg(make_cfg: Callable[..., DataConfig], corpus_dir: Path) -> Callable[..., DataConfig]:
    """Config factory for the local text corpus."""

    def make(**overrides: object) -> DataConfig:
        fields: dict[str, object] = {"source": "text", "path": str(corpus_dir / "*.txt")}
        fields.update(overrides)
        return make_cfg(**fields)

    return make
