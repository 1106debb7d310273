"""FSDP2 distributed checkpoints: resume exactly, then consolidate into one file that generate.py reads.

The straight 10-step FSDP run is the torchrun session run; here a run stops at step 4 (its
last.ckpt is a directory of shards; made on the spawned ranks of conftest.spawned_runs) and
`python train.py trainer=fsdp trainer.accelerator=cpu trainer.devices=2 ckpt_path=...` resumes it to
step 10.
"""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from .helpers import REPO, STEPS, TWO_CPU, Run, common, read_metrics, run, series, torchrun_job_dir, train_cmd
from .helpers import env as clean_env

pytestmark = [pytest.mark.multiproc, pytest.mark.slow]
STOP = 4


def fsdp(cache: Path) -> list[str]:
    return ["model.n_layer=2", "trainer=fsdp", *common(cache), *TWO_CPU, "logger=csv"]


def two_rank_jobs(cache: Path) -> dict[str, list[str]]:
    """The first part, stopped at step 4, made on the session's spawned ranks (conftest.spawned_runs):
    the command line is the resumed part's."""
    return {"first": [*fsdp(cache), f"trainer.max_steps={STOP}"]}


@pytest.fixture(scope="module")
def resumed(dist_root: Path, cache: Path, spawned_runs: dict[str, Path]) -> Path:
    """FSDP for 4 steps, then `python train.py ... ckpt_path=<first>/checkpoints/last.ckpt` to step
    10, the second part with every block checkpointed (a resume may change
    model.activation_checkpointing)."""
    first, second = spawned_runs["fsdp/first"], dist_root / "fsdp_resumed"
    ckpt = first / "checkpoints" / "last.ckpt"
    assert ckpt.is_dir() and (ckpt / ".metadata").is_file() and len(list(ckpt.glob("*.distcp"))) == 2
    assert not list(ckpt.parent.glob(".*.tmp")), "a temporary checkpoint directory was left behind"
    resume = [f"ckpt_path={ckpt}", "model.activation_checkpointing=full", f"hydra.run.dir={second}"]
    run(train_cmd(*fsdp(cache), *resume), dist_root / "cwd_resumed").check()
    return second


def test_resume_continues_like_the_straight_run(resumed: Path, torchrun_run: Run) -> None:
    torchrun_run.check()
    straight = series(read_metrics(torchrun_job_dir(torchrun_run)), "train/loss")
    again = series(read_metrics(resumed), "train/loss")
    assert list(again) == list(range(STOP, STEPS)), "the resumed run should log steps 4..9 only"
    for step, loss in again.items():
        assert loss == pytest.approx(straight[step], rel=1e-6), step


def test_consolidate_then_generate(resumed: Path, tmp_path: Path) -> None:
    ckpt = resumed / "checkpoints" / "last.ckpt"
    out = tmp_path / "model.pt"
    cons = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "consolidate.py"), str(ckpt), str(out)],
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert cons.returncode == 0, cons.stderr[-3000:]
    saved = torch.load(out, weights_only=True)
    assert sorted(saved) == ["documents", "model_config", "state_dict", "tokenizer"]
    assert saved["documents"] is None  # no data.document_mask in this run
    assert saved["model_config"]["n_layer"] == 2 and saved["model_config"]["n_embd"] == 64
    assert not any(k.startswith("model.") for k in saved["state_dict"])
    assert saved["tokenizer"]

    # the trained weights, not the initial ones: their global norm is what telemetry logged last
    step = torch.load(ckpt / "meta.pt", weights_only=True)["global_step"] - 1
    unique = {id(t): t for t in saved["state_dict"].values()}.values()  # tied: count once
    norm = math.sqrt(sum(float(t.double().pow(2).sum()) for t in unique))
    assert norm == pytest.approx(read_metrics(resumed)[step]["param_norm/total"], rel=1e-5)

    gen = subprocess.run(
        [sys.executable, str(REPO / "generate.py"), f"ckpt_path={out}", "max_new_tokens=5"],
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert gen.returncode == 0, gen.stderr[-3000:]
    assert gen.stdout.strip("\n"), "generate.py printed nothing"
