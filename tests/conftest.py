"""Shared test helpers: run the real entry points as a user would, tiny and fast."""

from __future__ import annotations

import csv
import fcntl
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
TINY = [
    "model.n_layer=2",
    "model.n_embd=64",
    "model.n_head=4",
    "model.block_size=64",
    "data.batch_size=8",
    "data.max_bytes=400000",
    "data.val_windows=16",  # 2 batches of 8
    "trainer.log_every_n_steps=1",
    "trainer.enable_progress_bar=false",
    "sample.max_new_tokens=8",
    "logger=csv",
    "callbacks.tasks.names=[]",  # no task in the many tiny runs; tests that want one name it after TINY
]


def run_module(
    module: str, *args: str, timeout: int = 300, env: dict | None = None
) -> subprocess.CompletedProcess:
    """`python -m <module>` from the repository root (how the dev/bench tools run), output captured."""
    full_env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true", **(env or {})}
    full_env.pop("LOCAL_RANK", None)
    return subprocess.run([sys.executable, "-m", module, *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout, env=full_env)  # fmt: skip


def run_script(
    script: str, *args: str, cwd: Path | None = None, timeout: int = 300, env: dict | None = None
) -> subprocess.CompletedProcess:
    """Run a repo script with this interpreter; output captured as text."""
    full_env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true", **(env or {})}
    full_env.pop("LOCAL_RANK", None)
    return subprocess.run(
        [sys.executable, str(REPO / script), *args],
        cwd=cwd or REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
    )


def read_csv_metrics(run_dir: Path) -> list[dict[str, str]]:
    with open(run_dir / "csv" / "metrics.csv") as f:
        return list(csv.DictReader(f))


def column(rows: list[dict[str, str]], name: str) -> list[tuple[int, float]]:
    """(step, value) pairs of one metric, in file order."""
    return [(int(r["step"]), float(r[name])) for r in rows if r.get(name)]


@pytest.fixture(autouse=True, scope="session")
def _one_thread():
    """In-process tests run tiny models: intra-op threads only add overhead (5× slower when the
    2 cores are shared); subprocess runs keep torch's default."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One token cache per test session: tokenizing once is enough."""
    return tmp_path_factory.getbasetemp() / "token-cache"


QUICK_ENV = {"OMP_NUM_THREADS": "1"}


def shared_root(factory: pytest.TempPathFactory) -> Path:
    """The test run's temporary root, the same for every pytest-xdist worker (each worker's own
    basetemp is a folder in it); without xdist, the session's basetemp."""
    base = factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


T = TypeVar("T")


def built_once(
    factory: pytest.TempPathFactory,
    name: str,
    build: Callable[[], T],
    dump: Callable[[T], Any] = str,
    load: Callable[[Any], T] = Path,  # type: ignore[assignment]
) -> T:
    """An expensive end-to-end run made once per test run, not once per xdist worker: the first
    worker to ask builds it under a file lock (the others wait) and keeps its value as JSON (`dump`,
    `load`: a path by default); a failed build keeps nothing, so the next asker tries again and sees
    the same failure."""
    root = shared_root(factory)
    value = root / f"{name}.json"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if value.exists():
            return load(json.loads(value.read_text()))
        result = build()
        value.write_text(json.dumps(dump(result)))
        return result


@pytest.fixture(scope="session")
def quick_tying_sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`python train.py -m experiment=ablate_tying_quick` (8 jobs, serial, one thread, default
    loggers: wandb offline + csv), run once for the report's tests and the launchers' comparisons
    (shared by the xdist workers; tests copy it before changing anything)."""

    def build() -> Path:
        out = shared_root(tmp_path_factory) / "quick-tying" / "sweep"
        cache = out.parent.parent / "token-cache"  # tests find it as quick_tying_sweep.parent.parent
        proc = run_script(
            "train.py", "-m", "experiment=ablate_tying_quick", f"hydra.sweep.dir={out}",
            f"data.cache_dir={cache}", env=QUICK_ENV, timeout=600,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-3000:]
        return out

    return built_once(tmp_path_factory, "quick-tying-sweep", build)
