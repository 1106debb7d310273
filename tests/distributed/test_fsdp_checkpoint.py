"""FSDP2 distributed checkpoints: resume exactly, written synchronously or off the training thread
(trainer.fsdp.async_save), then consolidate into one file that generate.py reads.

The straight 10-step FSDP run is the torchrun session run. On the session's spawned ranks
(conftest.spawned_runs, in this order): `first` stops at step 4 with synchronous saves (its
last.ckpt is a directory of shards); `async` saves asynchronously and trains on to step 8, where
rank 1's write of last.ckpt fails (injected in torch's file writer); `resumed` resumes `async`'s
last.ckpt (step 4: the failed write was not swapped in) to step 10, saving asynchronously, its last
save finished at teardown. The command line of a resume (`python train.py trainer=fsdp ... ckpt_path=`)
is what the spawned ranks run (tests/distributed/ranks.py); its launch is the torchrun run's.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch

from .helpers import REPO, STEPS, TWO_CPU, Run, common, read_metrics, series, spawned_dir, torchrun_job_dir
from .helpers import env as clean_env

pytestmark = [pytest.mark.multiproc, pytest.mark.slow]
STOP = 4
FAILS_AT = 8  # the async run's second validation: its write of last.ckpt fails there


def fsdp(cache: Path) -> list[str]:
    return ["model.n_layer=2", "trainer=fsdp", *common(cache), *TWO_CPU, "logger=csv"]


def two_rank_jobs(cache: Path) -> dict[str, list[str]]:
    """Run on the session's spawned ranks (conftest.spawned_runs), in this order."""
    asynchronous = [*fsdp(cache), "trainer.fsdp.async_save=true"]
    ckpt = spawned_dir(cache, "fsdp/async") / "checkpoints" / "last.ckpt"
    return {
        "first": [*fsdp(cache), f"trainer.max_steps={STOP}"],
        "async": [*asynchronous, f"trainer.max_steps={FAILS_AT}"],
        # a resume may change model.activation_checkpointing: every block checkpointed here
        "resumed": [*asynchronous, f"ckpt_path={ckpt}", "model.activation_checkpointing=full"],
    }


@contextmanager
def second_last_write_fails() -> Iterator[None]:
    """On rank 1 only, DCP's file writer raises at its second write into `.last.ckpt.tmp` (step 8's
    save); the run then fails with the strategy's AsyncSaveError (metrics.json records it), which
    is this job's expected end, not the spawned pool's failure."""
    import torch.distributed as dist
    from torch.distributed.checkpoint.filesystem import _FileSystemWriter

    from gptlab.training.dcp_async import AsyncSaveError

    write_data, writes = _FileSystemWriter.write_data, []

    def failing(self, plan, planner):  # noqa: ANN001, ANN202 (torch's signature)
        if Path(self.path).name == ".last.ckpt.tmp" and dist.get_rank() == 1:
            writes.append(self.path)
            if len(writes) == 2:
                raise OSError(28, "No space left on device (injected)")
        return write_data(self, plan, planner)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_FileSystemWriter, "write_data", failing)
        try:
            yield
        except AsyncSaveError:
            pass


TWO_RANK_WRAPS = {"async": second_last_write_fails}


def shards(ckpt: Path, out: Path) -> dict:
    """A distributed checkpoint's model and optimizer state as one dict (DCP's own converter)."""
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

    dcp_to_torch_save(ckpt, out)
    return torch.load(out, weights_only=True)


def same(a: object, b: object) -> bool:
    """Equal bit for bit: tensors by torch.equal (dtype and shape too), containers item by item."""
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return isinstance(b, list | tuple) and len(a) == len(b) and all(map(same, a, b))
    return a == b


@pytest.fixture(scope="module")
def resumed(spawned_runs: dict[str, Path]) -> Path:
    first = spawned_runs["fsdp/first"] / "checkpoints" / "last.ckpt"
    assert first.is_dir() and (first / ".metadata").is_file() and len(list(first.glob("*.distcp"))) == 2
    assert not list(first.parent.glob(".*.tmp")), "a temporary checkpoint directory was left behind"
    return spawned_runs["fsdp/resumed"]


def test_a_failed_async_write_keeps_the_previous_checkpoint_equal_to_the_sync_one(
    spawned_runs: dict[str, Path], tmp_path: Path
) -> None:
    """The async run's step-4 checkpoint, written while steps 5-8 trained, holds what the synchronous
    run saved at step 4, bit for bit; step 8's failed write of last.ckpt left it in place (and
    failed the run, saying so); best.ckpt is a whole checkpoint too."""
    run = spawned_runs["fsdp/async"]
    record = json.loads((run / "metrics.json").read_text())
    assert record["status"] == "failed", record
    assert "asynchronous checkpoint save" in record["error"] and "last.ckpt" in record["error"], record
    last = run / "checkpoints" / "last.ckpt"
    assert torch.load(last / "meta.pt", weights_only=True)["global_step"] == STOP
    sync = shards(spawned_runs["fsdp/first"] / "checkpoints" / "last.ckpt", tmp_path / "sync.pt")
    assert same(shards(last, tmp_path / "async.pt"), sync)
    best = run / "checkpoints" / "best.ckpt"
    assert torch.load(best / "meta.pt", weights_only=True)["global_step"] in (STOP, FAILS_AT)
    assert shards(best, tmp_path / "best.pt")["state_dict"].keys() == sync["state_dict"].keys()


def test_resume_continues_like_the_straight_run(resumed: Path, torchrun_run: Run) -> None:
    torchrun_run.check()
    straight = series(read_metrics(torchrun_job_dir(torchrun_run)), "train/loss")
    again = series(read_metrics(resumed), "train/loss")
    assert list(again) == list(range(STOP, STEPS)), "the resumed run should log steps 4..9 only"
    for step, loss in again.items():
        assert loss == pytest.approx(straight[step], rel=1e-6), step
    # its last save, asynchronous, was swapped in at teardown: last.ckpt is the final step's
    last = resumed / "checkpoints" / "last.ckpt"
    assert torch.load(last / "meta.pt", weights_only=True)["global_step"] == STEPS
    assert not list(last.parent.glob(".*.tmp")), "a temporary checkpoint directory was left behind"


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
