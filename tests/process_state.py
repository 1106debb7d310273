"""The process-wide state a `python train.py` run changes, taken before an in-process run and put back
after it, so that a later test of the same pytest worker meets the process as it was.

A run in the test's own process (tests/cli_here.py `train_py_run_here`) saves the 8-10 CPU s of a
fresh interpreter, but it runs Hydra's entry, Lightning and wandb in a process that goes on: Hydra's
singletons, the loggers Hydra configures, wandb's service and environment, torch's threads, dtype
and random state, signal handlers and the working directory are all the process's own.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import signal
import sys
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2)


def wandb_torn_down() -> None:
    """No wandb run open and no wandb service running, as in a process that never imported wandb
    (the next run's settings are read from the environment afresh). Nothing when wandb was never
    imported."""
    wandb = sys.modules.get("wandb")
    if wandb is None:
        return
    if wandb.run is not None:
        wandb.finish()
    wandb.teardown()


@dataclass
class _Logger:
    handlers: list[logging.Handler]
    level: int
    propagate: bool
    disabled: bool


def _loggers() -> dict[str, _Logger]:
    """Every logger the logging module knows (root as ""), by name."""
    found = {"": logging.getLogger()}
    known = logging.Logger.manager.loggerDict.items()
    found.update((n, lg) for n, lg in known if isinstance(lg, logging.Logger))
    return {n: _Logger(lg.handlers[:], lg.level, lg.propagate, lg.disabled) for n, lg in found.items()}


@dataclass
class ProcessState:
    """What `taken` holds: each part of the process a run may change."""

    argv: list[str] = field(default_factory=lambda: sys.argv[:])
    path: list[str] = field(default_factory=lambda: sys.path[:])
    environ: dict[str, str] = field(default_factory=lambda: dict(os.environ))
    cwd: str = field(default_factory=os.getcwd)
    loggers: dict[str, _Logger] = field(default_factory=_loggers)
    logging_disabled: int = field(default_factory=lambda: logging.root.manager.disable)
    signals: dict[int, Any] = field(default_factory=lambda: {s: signal.getsignal(s) for s in SIGNALS})
    threads: int = field(default_factory=torch.get_num_threads)
    dtype: torch.dtype = field(default_factory=torch.get_default_dtype)
    matmul_precision: str = field(default_factory=torch.get_float32_matmul_precision)
    deterministic: tuple[bool, bool] = field(
        default_factory=lambda: (
            torch.are_deterministic_algorithms_enabled(),
            torch.is_deterministic_algorithms_warn_only_enabled(),
        )
    )
    rng: tuple[Any, Any, Any] = field(
        default_factory=lambda: (torch.get_rng_state(), np.random.get_state(), random.getstate())
    )
    hydra: dict[str, Any] = field(default_factory=lambda: _hydra_singletons())

    def restore(self) -> None:
        """Put every part back; the handlers a run added (Hydra's train.log files) are closed."""
        from hydra.core.global_hydra import GlobalHydra
        from hydra.core.singleton import Singleton
        from omegaconf.basecontainer import BaseContainer

        wandb_torn_down()
        GlobalHydra.instance().clear()
        # resolvers registered meanwhile (train.py's ${launch_id:...}) stay: their modules, already
        # imported, would not register them again
        Singleton.set_state({**self.hydra, "omegaconf_resolvers": BaseContainer._resolvers})
        kept = {id(h) for lg in self.loggers.values() for h in lg.handlers}
        for name, now in _loggers().items():
            before = self.loggers.get(name)
            lg = logging.getLogger(name or None)
            for h in now.handlers:
                if id(h) not in kept:
                    h.close()
            if before is not None:
                lg.handlers[:] = before.handlers
                lg.setLevel(before.level)
                lg.propagate, lg.disabled = before.propagate, before.disabled
        logging.disable(self.logging_disabled)
        for s, handler in self.signals.items():
            signal.signal(s, handler)
        torch.set_num_threads(self.threads)
        torch.set_default_dtype(self.dtype)
        torch.set_float32_matmul_precision(self.matmul_precision)
        torch.use_deterministic_algorithms(self.deterministic[0], warn_only=self.deterministic[1])
        torch.set_rng_state(self.rng[0])
        np.random.set_state(self.rng[1])
        random.setstate(self.rng[2])
        os.chdir(self.cwd)
        os.environ.clear()
        os.environ.update(self.environ)
        sys.argv[:], sys.path[:] = self.argv, self.path


def _hydra_singletons() -> dict[str, Any]:
    from hydra.core.singleton import Singleton

    return Singleton.get_state()


@contextlib.contextmanager
def kept() -> Iterator[ProcessState]:
    """The process as it was before the block, after it (the block's warnings filters too), whether
    the block returned or raised."""
    state = ProcessState()
    try:
        with warnings.catch_warnings():
            yield state
    finally:
        state.restore()
