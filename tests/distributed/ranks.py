"""Runs of the app for the equality tests that are not about the command line: one process in the
test's own, and two gloo ranks spawned once for several runs, one after the other.

A `python train.py` start-up costs 8-10 CPU s before it trains, a two-process one twice that; here
the one-process reference pays nothing (this process has imported everything) and the two spawned
ranks pay one import each for all the runs handed to them. What runs is what train.py runs:
`gptlab.training.app.train` on the config composed as train.py composes it, with LOCAL_RANK, RANK,
WORLD_SIZE and MASTER_* set as a launcher sets them (so Lightning launches nothing, as under torchrun).
The command line itself, its launchers and exit codes are tested by the tests that run train.py.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path

import pytest
import torch
import torch.multiprocessing as mp

from tests.waiting import join

LAUNCH_VARS = ("LOCAL_RANK", "RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "NODE_RANK")
Job = tuple[Path, Sequence[str]]  # (run dir, the Hydra overrides of train.py's command line)
# entered around a job's train() on each spawned rank (a module-level function: spawn pickles it by
# name): what the test injects there, e.g. a failing storage write, and the error it expects
Wrap = Callable[[], AbstractContextManager[object]]


def train_once(run_dir: Path, overrides: Sequence[str]) -> dict:
    """One run in this process, as `python train.py <overrides> hydra.run.dir=<run_dir>` trains it;
    returns its metrics.json. Torch's deterministic mode is left as it was found."""
    from gptlab.compose import compose_raw
    from gptlab.training.app import train, validate

    deterministic = torch.are_deterministic_algorithms_enabled()
    with _quiet_env():
        try:
            raw = compose_raw(list(overrides))[0]
            return train(validate(raw), raw, Path(run_dir))
        finally:
            torch.use_deterministic_algorithms(deterministic)


def train_two_ranks(jobs: Sequence[Job], what: str, wraps: dict[Path, Wrap] | None = None) -> None:
    """Each job on two gloo ranks (LOCAL_RANK 0 and 1), in order, in one pair of spawned processes
    (a later job may resume from an earlier one's checkpoint); each job's token cache filled here
    first (two ranks would race to write it); `wraps`: run dir -> Wrap, for the jobs that have one."""
    from gptlab.compose import compose_raw
    from gptlab.data.datamodule import TokenDataModule
    from gptlab.training.app import validate

    for _, overrides in jobs:
        cfg = validate(compose_raw(list(overrides))[0])
        TokenDataModule(cfg.data, block_size=cfg.model.block_size, seed=cfg.seed).prepare()
    with _quiet_env():  # inherited by the spawned processes
        plain = [(str(d), list(o), (wraps or {}).get(d)) for d, o in jobs]
        ctx = mp.start_processes(
            _rank, args=(plain, free_ports(len(jobs))), nprocs=2, join=False, start_method="spawn"
        )
        join(ctx, what)


@contextmanager
def _quiet_env() -> Iterator[None]:
    """No wandb, one thread per process, and no launcher variables from the caller."""
    with pytest.MonkeyPatch.context() as patch:
        for key, value in {"OMP_NUM_THREADS": "1", "WANDB_MODE": "disabled", "WANDB_SILENT": "true"}.items():
            patch.setenv(key, value)
        for key in LAUNCH_VARS:
            patch.delenv(key, raising=False)
        yield


def _rank(rank: int, jobs: list[tuple[str, list[str], Wrap | None]], ports: list[int]) -> None:
    """Rank `rank` of every job, in order, each job on its own port."""
    from gptlab.compose import compose_raw
    from gptlab.training.app import train, validate

    os.environ.update(MASTER_ADDR="127.0.0.1", WORLD_SIZE="2", NODE_RANK="0", LOCAL_RANK=str(rank))
    torch.set_num_threads(1)
    for (run_dir, overrides, wrap), port in zip(jobs, ports, strict=True):
        os.environ["MASTER_PORT"] = str(port)
        raw = compose_raw(overrides)[0]
        with wrap() if wrap else nullcontext():
            train(validate(raw), raw, Path(run_dir))


def free_ports(n: int) -> list[int]:
    """n distinct free local ports (each job's rendezvous gets its own)."""
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports
