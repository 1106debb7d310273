"""tests/cli_here.py's in-process `python train.py -m`: the run is the real one, and the process is
left as it was (a later test of the same pytest worker must not see Hydra's, logging's, wandb's or
torch's state from it)."""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
from pathlib import Path

import pytest
import torch

from tests.cli_here import WouldSpawn, train_py_run_here
from tests.training.rel_harness import TINY

# one job of two steps, wandb offline as well as the CSV log (wandb's service is what most needs
# tearing down), its view written at the sweep's end
SWEEP = [
    "-m", "model/ffn=gelu", *[t for t in TINY if not t.startswith("logger=")], "logger.csv=true",
    "trainer.max_steps=2", "trainer.val_check_interval=2",
]  # fmt: skip


def _children() -> set[int]:
    me = str(os.getpid())
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if stat.read_text().rsplit(")", 1)[1].split()[1] == me:
                found.add(int(stat.parent.name))
        except (OSError, IndexError):
            continue
    return found


def _logging() -> dict[str, tuple]:
    return {
        name: (tuple(lg.handlers), lg.level, lg.propagate, lg.disabled)
        for name, lg in [("", logging.getLogger()), *logging.Logger.manager.loggerDict.items()]
        if isinstance(lg, logging.Logger)
    }


def test_a_sweep_run_here_finishes_and_leaves_the_process_as_it_was(tmp_path: Path) -> None:
    import datasets  # noqa: F401 - their import-time log handlers are not the run's doing
    import wandb
    import wandb.sdk.wandb_setup as wandb_setup
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.hydra_config import HydraConfig

    cwd, env, argv, path = os.getcwd(), dict(os.environ), sys.argv[:], sys.path[:]
    loggers, handlers = _logging(), {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    threads, dtype, rng = torch.get_num_threads(), torch.get_default_dtype(), torch.get_rng_state()
    children, live = _children(), {t.ident for t in threading.enumerate()}
    sweep = tmp_path / "sweep"
    ran = train_py_run_here(
        *SWEEP, f"hydra.sweep.dir={sweep}", f"data.cache_dir={tmp_path / 'cache'}", cwd=tmp_path,
        env={"OMP_NUM_THREADS": "2"},
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-3000:]
    # the real run: Hydra's job log lines captured, the job finished, wandb offline wrote its run
    assert "#0 : model/ffn=gelu" in ran.stdout + ran.stderr
    assert "`Trainer.fit` stopped: `max_steps=2` reached." in ran.stderr  # Lightning's own handler
    assert json.loads((sweep / "0" / "metrics.json").read_text())["status"] == "finished"
    assert len(list(sweep.glob("0/wandb/offline-run-*/run-*.wandb"))) == 1
    # ... and the process as it was
    assert (os.getcwd(), dict(os.environ), sys.argv, sys.path) == (cwd, env, argv, path)
    assert _logging().items() >= loggers.items()  # loggers first made by the run may stay, unhandled
    assert {n: lg[0] for n, lg in _logging().items() if n not in loggers and lg[0]} == {}
    assert {s: signal.getsignal(s) for s in handlers} == handlers
    assert (torch.get_num_threads(), torch.get_default_dtype()) == (threads, dtype)
    assert torch.equal(torch.get_rng_state(), rng)
    assert not GlobalHydra.instance().is_initialized() and not HydraConfig.initialized()
    assert wandb.run is None and wandb_setup._singleton is None  # no run, no service
    assert _children() <= children  # wandb's service process ended with it
    assert all(t.daemon or t.ident in live for t in threading.enumerate())


def test_a_sweep_that_would_start_processes_is_refused(tmp_path: Path) -> None:
    """Two slots side by side are processes of their own: refused before any job starts."""
    with pytest.raises(WouldSpawn):
        train_py_run_here(
            "-m", "model/ffn=gelu,swiglu", *TINY, "hydra.launcher.slots=2", "hydra.launcher.threads=1",
            f"hydra.sweep.dir={tmp_path / 'sweep'}", f"data.cache_dir={tmp_path / 'cache'}",
        )  # fmt: skip
    assert not list((tmp_path / "sweep").glob("*/metrics.json"))
