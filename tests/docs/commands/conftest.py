"""Each pool module's scratch working directory and the session's token cache."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("documented")


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.getbasetemp() / "token-cache"  # tests/conftest.py's cache_dir
