"""Shared multi-process runs of train.py, each started once per session and read by several tests.

All runs train the same tiny model on the same data for the same 10 steps and the same GLOBAL batch
of 4 windows: one process with data.batch_size=4, or two with 2 each (the DataModule gives rank r the
stream positions g % 2 == r, so both ranks together read what the single process reads).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.conftest import built_once, shared_root

from .helpers import GLOBAL_BATCH, REPO, TWO_CPU, Run, common, run, spawned_dir, train_cmd
from .ranks import train_once, train_two_ranks

RUN_JSON = (  # a Run as built_once keeps it
    lambda r: {"cmd": r.cmd, "returncode": r.returncode, "output": r.output, "cwd": str(r.cwd)},
    lambda d: Run(d["cmd"], d["returncode"], d["output"], Path(d["cwd"])),
)


@pytest.fixture(scope="session")
def dist_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Shared by the xdist workers: the runs below are made once per test run (built_once)."""
    root = shared_root(tmp_path_factory) / "distributed"
    root.mkdir(exist_ok=True)
    return root


@pytest.fixture(scope="session")
def cache(dist_root: Path) -> Path:
    return dist_root / "cache"


@pytest.fixture(scope="session")
def single_run(tmp_path_factory: pytest.TempPathFactory, dist_root: Path, cache: Path) -> Path:
    """One process, data.batch_size=4, CSV log only: the reference."""
    return built_once(tmp_path_factory, "dist-single-run", lambda: _single_run(dist_root, cache))


def _single_run(dist_root: Path, cache: Path) -> Path:
    """In this process (tests/distributed/ranks.py): nothing here is about the command line, which
    the sweep and torchrun runs below go through."""
    out = dist_root / "single"
    train_once(
        out,
        [*common(cache), "model.n_layer=2", f"data.batch_size={GLOBAL_BATCH}", "trainer.accelerator=cpu",
         "trainer.devices=1", "logger=csv"],
    )  # fmt: skip
    return out


@pytest.fixture(scope="session")
def spawned_runs(tmp_path_factory: pytest.TempPathFactory, dist_root: Path, cache: Path) -> dict[str, Path]:
    """The two-rank runs that are not about the command line (test_moe_ddp, test_mup_strategies,
    test_muon_ddp, test_fsdp_checkpoint: each module's two_rank_jobs, and its TWO_RANK_WRAPS),
    "<module>/<run>" -> run dir, all eight on one pair of ranks spawned once
    (tests/distributed/ranks.py): one import per rank for them all instead of one per rank and run."""
    return built_once(
        tmp_path_factory,
        "dist-spawned-runs",
        lambda: _spawned_runs(dist_root, cache),
        lambda runs: {name: str(d) for name, d in runs.items()},
        lambda saved: {name: Path(d) for name, d in saved.items()},
    )


def _spawned_runs(dist_root: Path, cache: Path) -> dict[str, Path]:
    from . import test_fsdp_checkpoint, test_moe_ddp, test_muon_ddp, test_mup_strategies

    modules = {
        "moe": test_moe_ddp,
        "mup": test_mup_strategies,
        "muon": test_muon_ddp,
        "fsdp": test_fsdp_checkpoint,
    }
    jobs = {
        f"{label}/{name}": overrides
        for label, module in modules.items()
        for name, overrides in module.two_rank_jobs(cache).items()
    }
    out = {name: spawned_dir(cache, name) for name in jobs}
    wraps = {
        out[f"{label}/{name}"]: wrap
        for label, module in modules.items()
        for name, wrap in getattr(module, "TWO_RANK_WRAPS", {}).items()
    }
    train_two_ranks([(out[name], jobs[name]) for name in jobs], "the spawned two-rank runs", wraps)
    return out


@pytest.fixture(scope="session")
def sweep_run(tmp_path_factory: pytest.TempPathFactory, dist_root: Path, cache: Path) -> Run:
    """`-m model.n_layer=2,4` with 2 DDP processes per job, wandb offline + CSV (logger default),
    every block checkpointed (model.activation_checkpointing=full).

    Job 0 (n_layer=2) is the DDP run of the equivalence test: against the single process, which
    does not checkpoint, it also shows that checkpointing changes no loss and no telemetry value.
    """
    return built_once(tmp_path_factory, "dist-sweep-run", lambda: _sweep_run(dist_root, cache), *RUN_JSON)


def _sweep_run(dist_root: Path, cache: Path) -> Run:
    return run(
        train_cmd(
            "-m",
            "model.n_layer=2,4",
            "model.activation_checkpointing=full",
            *common(cache),
            *TWO_CPU,
            f"hydra.sweep.dir={dist_root / 'sweep'}",
        ),
        dist_root / "cwd_sweep",
    )


@pytest.fixture(scope="session")
def torchrun_run(tmp_path_factory: pytest.TempPathFactory, dist_root: Path, cache: Path) -> Run:
    """torchrun --standalone --nproc_per_node=2 train.py -m ... trainer=fsdp, sweep dir left to
    its default, so both ranks must resolve the same `multirun/torchrun-<id>` on their own.

    Its only job is the FSDP run of the equivalence test and the straight run of the resume test.
    Block 0 of its 2 is checkpointed (model.activation_checkpointing=selective, every 2nd block),
    block 1 not: the equivalence test compares it with the single process, which checkpoints none.
    """
    return built_once(
        tmp_path_factory, "dist-torchrun-run", lambda: _torchrun_run(dist_root, cache), *RUN_JSON
    )


def _torchrun_run(dist_root: Path, cache: Path) -> Run:
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node=2",
        str(REPO / "train.py"),
        "-m",
        "model.n_layer=2",
        "trainer=fsdp",
        "model.activation_checkpointing=selective",
        *common(cache),
        *TWO_CPU,
        "logger=csv",
    ]
    return run(cmd, dist_root / "cwd_torchrun")
