"""`python train.py <args>` in the test's own process, for commands refused before any job starts.

A refusal (a bad grid, bad launcher settings) is train.py's Hydra entry composing, checking and
exiting 2; a subprocess pays 2.5 CPU s of start-up for it. Each kind of refusal keeps one test
that runs it as a subprocess; its other cases run here, through the same `hydra.main`.
"""

from __future__ import annotations

import logging
import runpy
import sys

import pytest

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
