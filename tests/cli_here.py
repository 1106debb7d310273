"""`python train.py <args>` in the test's own process: a command refused before any job starts
(`train_py_here`), or a run or sweep to its end (`train_py_run_here`).

A refusal (a bad grid, bad launcher settings) is train.py's Hydra entry composing, checking and
exiting 2; a subprocess pays 2.5 CPU s of start-up for it. A run or a serial sweep pays 8-10 CPU s
(torch, Lightning, wandb imported afresh). Each kind of refusal keeps one test that runs it as a
subprocess, and train.py, its multirun and each launcher keep real subprocess runs in the suite
(docs/development.md); the other cases run here, through the same `hydra.main`.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import runpy
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from tests.conftest import REPO


def train_py_here(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str], *args: str
) -> tuple[int | str | None, str]:
    """`python train.py <args>` run in this process up to its exit: (exit code, what it wrote to
    stderr). train.py itself, through Hydra's own entry (hydra.main reads sys.argv), for a command
    that is refused before any job starts: the process start-up (2.5 CPU s) is what it saves. Hydra's
    global state and the root logger's handlers are put back afterwards, so that a later test of
    this process (training in-process, whose run reads HydraConfig) does not see this command's."""
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.singleton import Singleton
    from omegaconf.basecontainer import BaseContainer

    root = logging.getLogger()
    handlers, level, state = root.handlers[:], root.level, Singleton.get_state()
    monkeypatch.setattr(sys, "argv", [str(REPO / "train.py"), *args])
    capfd.readouterr()
    GlobalHydra.instance().clear()
    try:
        with pytest.raises(SystemExit) as exited:
            runpy.run_path(str(REPO / "train.py"), run_name="__main__")
    finally:
        GlobalHydra.instance().clear()
        # Hydra's singletons (HydraConfig, JobRuntime) as they were; resolvers registered meanwhile
        # (train.py's ${launch_id:...}) stay, as their modules will not register them again
        Singleton.set_state({**state, "omegaconf_resolvers": BaseContainer._resolvers})
        root.handlers[:] = handlers
        root.setLevel(level)
    return exited.value.code, capfd.readouterr().err


class WouldSpawn(RuntimeError):
    """The run here would start processes of its own: run it as a subprocess instead."""


LAUNCHERS_VARS = ("SLURM_", "TORCHELASTIC_", "LOCAL_RANK", "RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
SPAWN_REFUSED = "the slots launcher planned several slots (processes): run this sweep as a subprocess"


def _no_slots(*_: object, **__: object) -> None:
    raise WouldSpawn(SPAWN_REFUSED)


@contextlib.contextmanager
def _streams_to(out: io.StringIO, err: io.StringIO) -> Iterator[None]:
    """The log handlers that libraries made at import (Lightning's, on stderr) write to `out` and
    `err` meanwhile, as they would to a subprocess's stdout and stderr."""
    moved, stdout, stderr = {}, (sys.stdout, sys.__stdout__), (sys.stderr, sys.__stderr__)
    for lg in [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]:
        for h in getattr(lg, "handlers", []):
            if type(h) is logging.StreamHandler and (h.stream in stdout or h.stream in stderr):
                moved[h] = h.setStream(out if h.stream in stdout else err)
    try:
        yield
    finally:
        for h, stream in moved.items():
            h.setStream(stream)


def _warning_to_stderr(
    message: Warning | str, category: type[Warning], filename: str, lineno: int, file: object = None,
    line: str | None = None,
) -> None:  # fmt: skip
    sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))


def train_py_run_here(
    *args: str, cwd: Path = REPO, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """`python train.py <args>` run to its end in this process, as `tests.conftest.run_script` runs it
    (from `cwd`, wandb offline and silent, `env` added): its exit code (0 when it returns), stdout and
    stderr, Hydra's and the jobs' log lines included. A single run or a multirun whose launcher is
    Hydra's basic one (hydra/launcher=slots with one slot: its jobs one after another in this
    process); a sweep that would start processes (slots side by side, a submitit array) is refused
    (WouldSpawn), as is any other hydra/launcher. Every process-wide state the run touches is put
    back afterwards (tests/process_state.py). OMP_NUM_THREADS in `env` sets torch's threads for the
    run, as it would a fresh process's."""
    from hydra.core.global_hydra import GlobalHydra

    import gptlab.launcher.pool as pool
    from tests.process_state import kept, wandb_torn_down

    refused = [a for a in args if a.startswith(("hydra/launcher=", "hydra.launcher._target_"))]
    assert not refused or refused == ["hydra/launcher=slots"], f"spawns its jobs: {refused}"
    out, err = io.StringIO(), io.StringIO()
    with kept(), _streams_to(out, err), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        os.chdir(cwd)
        for key in [k for k in os.environ if k.startswith(LAUNCHERS_VARS)]:  # not a rank of anything
            del os.environ[key]
        os.environ.update({"WANDB_MODE": "offline", "WANDB_SILENT": "true", **(env or {})})
        if "OMP_NUM_THREADS" in os.environ:
            torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
        wandb_torn_down()  # its settings read from this environment, as a fresh process would
        warnings.showwarning = _warning_to_stderr  # as a process shows them, not in pytest's summary
        sys.argv[:] = [str(REPO / "train.py"), *args]
        GlobalHydra.instance().clear()
        real, pool.run_in_slots = pool.run_in_slots, _no_slots
        try:
            runpy.run_path(str(REPO / "train.py"), run_name="__main__")
            code: int | str | None = 0
        except SystemExit as exited:
            code = exited.code
        finally:
            pool.run_in_slots = real
    if SPAWN_REFUSED in err.getvalue():  # Hydra reported it as the sweep's error, exit 1
        raise WouldSpawn(err.getvalue()[-2000:])
    argv = [sys.executable, "train.py", *args]
    return subprocess.CompletedProcess(argv, code, out.getvalue(), err.getvalue())
