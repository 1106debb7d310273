"""Exact resume on every rank: 2 gloo processes, dropout on, stopped at step 4 and resumed to step 8;
each rank's own per-step losses equal those of the uninterrupted run, under DDP and FSDP2.

The oracle is the uninterrupted run itself, with each rank's loss recorded by a callback written
here (train/loss is the mean over ranks). Every rank seeds the same, so on CPU the ranks' generators
would move in step and a checkpoint holding rank 0's state alone would pass unnoticed (on GPUs each
rank draws on its own device's generator). `RankStream` therefore moves rank r's generator on by r
draws before training, in every run: restoring rank 0's state on rank 1 then fails the test.

The runs build their Trainer through gptlab.training.app.train in two processes spawned here
(LOCAL_RANK set: Lightning launches nothing), so the test-only callbacks can be added.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import lightning as L
import pytest
import torch
import torch.multiprocessing as mp

from tests.distributed.ranks import free_ports
from tests.waiting import join

pytestmark = [pytest.mark.multiproc, pytest.mark.slow]
STOP, STEPS = 4, 8
RUN = [
    "trainer.devices=2",
    "data.batch_size=2",
    "model.dropout=0.2",
    "trainer.val_check_interval=4",  # the resumed run skips the step-4 validation: its draws must not count
    "callbacks.checkpoint_every_n_steps=4",
    "optim.warmup_steps=20",  # every step in the warmup: a step's LR does not depend on max_steps
    "logger=csv",
]
STRATEGIES = {"ddp": ["trainer.strategy=ddp"], "fsdp": ["trainer=fsdp"]}


class RankLosses(L.Callback):
    """Writes this rank's own loss of every step to `<run>/rank<r>.json`."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir, self.losses = run_dir, {}

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: Any, outputs: Any, *_: Any) -> None:
        self.losses[trainer.global_step - 1] = float(outputs["loss"])

    def on_train_end(self, trainer: L.Trainer, pl_module: Any) -> None:
        (self.run_dir / f"rank{trainer.global_rank}.json").write_text(json.dumps(self.losses))


class RankStream(L.Callback):
    """Moves rank r's torch, numpy and python generators on by r draws as fit starts."""

    def on_fit_start(self, trainer: L.Trainer, pl_module: Any) -> None:
        import random

        import numpy as np

        for _ in range(trainer.global_rank):
            torch.rand(1)
            np.random.rand()
            random.random()


def _train(run_dir: Path, cache: Path, port: int, *overrides: str) -> None:
    """One run of the app on this rank, with the two callbacks above after the app's own."""
    import gptlab.training.app as app
    from tests.training.rel_harness import TINY, compose_cfg

    os.environ["MASTER_PORT"] = str(port)
    raw = compose_cfg(*TINY, f"data.cache_dir={cache}", *RUN, *overrides)
    original = app.build_callbacks
    app.build_callbacks = lambda *a, **k: [*original(*a, **k), RankLosses(run_dir), RankStream()]
    try:
        app.train(app.validate(raw), raw, run_dir)
    finally:
        app.build_callbacks = original


def _worker(rank: int, root: Path, cache: Path, ports: list[int]) -> None:
    """Rank `rank` of every run, in order: straight to 8, to 4, resumed from 4 to 8; DDP then FSDP."""
    os.environ.update(
        MASTER_ADDR="127.0.0.1", WORLD_SIZE="2", NODE_RANK="0", LOCAL_RANK=str(rank), WANDB_MODE="disabled"
    )
    torch.set_num_threads(1)
    port = iter(ports)
    for name, strategy in STRATEGIES.items():
        full, first, resumed = root / f"{name}-full", root / f"{name}-first", root / f"{name}-resumed"
        _train(full, cache, next(port), *strategy, f"trainer.max_steps={STEPS}")
        _train(first, cache, next(port), *strategy, f"trainer.max_steps={STOP}")
        ckpt = first / "checkpoints" / "last.ckpt"
        _train(resumed, cache, next(port), *strategy, f"trainer.max_steps={STEPS}", f"ckpt_path={ckpt}")


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """All runs, in two spawned processes (the token cache filled here first, once)."""
    from gptlab.data.datamodule import TokenDataModule
    from gptlab.training.app import validate
    from tests.training.rel_harness import TINY, compose_cfg

    root = tmp_path_factory.mktemp("rng-ranks")
    cache = root / "cache"
    cfg = validate(compose_cfg(*TINY, f"data.cache_dir={cache}"))
    TokenDataModule(cfg.data, block_size=cfg.model.block_size, seed=cfg.seed).prepare()
    env = {"OMP_NUM_THREADS": "1", "WANDB_MODE": "disabled", "WANDB_SILENT": "true"}
    with pytest.MonkeyPatch.context() as patch:  # inherited by the spawned processes
        for key, value in env.items():
            patch.setenv(key, value)
        for key in ("LOCAL_RANK", "RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "NODE_RANK"):
            patch.delenv(key, raising=False)
        ports = free_ports(3 * len(STRATEGIES))
        ctx = mp.start_processes(
            _worker, args=(root, cache, ports), nprocs=2, join=False, start_method="spawn"
        )
        join(ctx, "the 2-process runs")
    return root


def losses(run_dir: Path, rank: int) -> dict[int, float]:
    return {int(s): v for s, v in json.loads((run_dir / f"rank{rank}.json").read_text()).items()}


@pytest.mark.parametrize("strategy", list(STRATEGIES))
def test_every_rank_resumes_its_own_stream(root: Path, strategy: str) -> None:
    for rank in (0, 1):
        full, again = losses(root / f"{strategy}-full", rank), losses(root / f"{strategy}-resumed", rank)
        assert sorted(full) == list(range(STEPS)) and sorted(again) == list(range(STOP, STEPS)), rank
        assert again == {s: full[s] for s in again}, f"rank {rank}: resumed losses differ"


@pytest.mark.parametrize("strategy", list(STRATEGIES))
def test_checkpoint_holds_each_ranks_own_state(root: Path, strategy: str) -> None:
    """Loadable with weights_only=True, one entry per rank, and the entries differ (the control:
    were they equal, restoring rank 0's state everywhere would pass the test above)."""
    ckpt = root / f"{strategy}-first" / "checkpoints" / "last.ckpt"
    saved = torch.load(ckpt / "meta.pt" if ckpt.is_dir() else ckpt, weights_only=True)
    ranks = saved["callbacks"]["RNGStateCheckpoint"]["ranks"]
    assert len(ranks) == 2 and all({"torch", "numpy", "python"} <= set(r) for r in ranks)
    assert not torch.equal(ranks[0]["torch"], ranks[1]["torch"])
    assert ranks[0]["python"] != ranks[1]["python"]
    (_, keys0, pos0, *_), (_, keys1, pos1, *_) = (r["numpy"] for r in ranks)
    assert pos0 != pos1 or not torch.equal(keys0, keys1)
