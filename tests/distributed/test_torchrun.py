"""torchrun starts the ranks: the app must spawn nothing, and under `-m` (every rank runs the whole
sweep) all ranks must resolve the same sweep directory (conf/hydra/default.yaml's launch_id)."""

from __future__ import annotations

import pytest

from .helpers import BLOCK, GLOBAL_BATCH, STEPS, Run, read_metrics, series, torchrun_job_dir

pytestmark = [pytest.mark.multiproc, pytest.mark.slow]


def test_one_sweep_dir_for_all_ranks(torchrun_run: Run) -> None:
    torchrun_run.check()
    assert sorted(p.name for p in torchrun_run.cwd.iterdir()) == ["multirun"], "stray output dirs"
    (sweep,) = list((torchrun_run.cwd / "multirun").iterdir())
    assert sweep.name.startswith("torchrun-"), sweep.name
    assert sorted(p.name for p in sweep.iterdir()) == ["0", "multirun.yaml", "progress.json"]


def test_one_two_process_job_and_no_extra_processes(torchrun_run: Run) -> None:
    torchrun_run.check()
    job = torchrun_job_dir(torchrun_run)
    assert not (job / "train_rank_1.log").exists(), "gptlab's launcher started a worker under torchrun"
    metrics = read_metrics(job)
    assert list(series(metrics, "train/loss")) == list(range(STEPS))
    # 2 ranks x data.batch_size=2: a third process would make it 6 windows per step
    assert series(metrics, "tokens_seen")[STEPS - 1] == STEPS * GLOBAL_BATCH * BLOCK
    assert (job / "checkpoints" / "last.ckpt").is_dir()  # FSDP: a distributed checkpoint
