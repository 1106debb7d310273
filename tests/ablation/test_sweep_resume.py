"""A sweep killed mid-job and re-run with the same command and sweep dir, twice: SIGKILL to the first
run, SIGTERM to the re-run (both while job 1 trains), then a last re-run. Each re-run leaves the
finished job untouched (every file's mtime) and resumes the interrupted one from its last.ckpt,
continuing its own wandb run (same id, read from the offline run files) in the sweep's group.
One sweep dir for both signals: a sweep start and job 0's training fewer than one sweep each."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from gptlab.analysis.sweep.jobs import read_csv_log
from tests.conftest import REPO
from tests.distributed.test_multirun import wandb_records
from tests.waiting import SUITE_LIMIT_S, ended, wait_until

pytestmark = pytest.mark.slow
STEPS = 150
# two jobs (gelu, swiglu) of the quick preset, long enough that a kill lands mid-training
GRID = [
    "-m",
    "experiment=ablate_ffn_quick",
    "seed=1",
    "optim.lr=0.003",
    "model.n_layer=2",
    "model.n_embd=64",
    "model.n_head=4",
    f"trainer.max_steps={STEPS}",
    "trainer.val_check_interval=25",
    "trainer.log_every_n_steps=5",
    "hydra.sweeper.report=false",
    "callbacks.tasks.names=[]",  # no test here reads a task score: none is scored at a job's end
]


def _env() -> dict[str, str]:
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true", "OMP_NUM_THREADS": "1"}
    env.pop("LOCAL_RANK", None)
    return env


def _sweep(sweep: Path, cache: Path) -> list[str]:
    return [
        sys.executable,
        str(REPO / "train.py"),
        *GRID,
        f"hydra.sweep.dir={sweep}",
        f"data.cache_dir={cache}",
    ]


def _mtimes(job: Path) -> dict[str, int]:
    return {str(p.relative_to(job)): p.stat().st_mtime_ns for p in job.rglob("*") if p.is_file()}


def _run_ids(job: Path) -> list[tuple[str, str | None]]:
    """(run id, group) of every wandb run file in the job's dir, oldest first. The id is the file's
    name (run-<id>.wandb); the group is its run record's, when one was flushed before a SIGKILL."""
    out = []
    for f in sorted(job.glob("wandb/offline-run-*/run-*.wandb")):
        runs = [r.run for r in wandb_records(f) if r.WhichOneof("record_type") == "run"]
        run_id = f.stem.removeprefix("run-")
        assert all(r.run_id == run_id for r in runs)
        out.append((run_id, runs[0].run_group if runs else None))
    return out


def _kill_mid_job(sweep: Path, cache: Path, sig: int) -> None:
    """Start the sweep (or re-run it); once job 1 has written a checkpoint of this run and is still
    training, send `sig`."""
    proc = subprocess.Popen(
        _sweep(sweep, cache), cwd=REPO, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    ckpt = sweep / "1" / "checkpoints" / "last.ckpt"
    old = ckpt.stat().st_mtime_ns if ckpt.is_file() else None  # the last attempt's, resumed from
    try:
        wait_until(
            lambda: ckpt.is_file() and ckpt.stat().st_mtime_ns != old,
            "job 1's next checkpoint", gone=ended(proc), poll_s=0.02,
        )  # fmt: skip
        proc.send_signal(sig)
        proc.communicate(timeout=SUITE_LIMIT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    expected = 143 if sig == signal.SIGTERM else -signal.SIGKILL
    assert proc.returncode == expected
    status = json.loads((sweep / "1" / "metrics.json").read_text())["status"]
    assert status == ("preempted" if sig == signal.SIGTERM else "running"), "the kill did not land mid-job"


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.getbasetemp() / "token-cache"


def _resumed_from_last_ckpt(sweep: Path) -> None:
    overrides = yaml.safe_load((sweep / "1" / ".hydra" / "overrides.yaml").read_text())
    ckpt = next(o for o in overrides if o.startswith("ckpt_path="))
    assert ckpt.endswith("/1/checkpoints/last.ckpt'")


def test_rerun_skips_finished_and_resumes_interrupted(tmp_path: Path, cache: Path) -> None:
    sweep = tmp_path / "sweep"
    _kill_mid_job(sweep, cache, signal.SIGKILL)
    finished = json.loads((sweep / "0" / "metrics.json").read_text())
    assert finished["status"] == "finished"
    before = _mtimes(sweep / "0")
    (first_id, group), *_ = _run_ids(sweep / "1")

    # the re-run after SIGKILL resumes job 1 (job 0 left alone), and is itself stopped by SIGTERM
    _kill_mid_job(sweep, cache, signal.SIGTERM)
    assert _mtimes(sweep / "0") == before
    _resumed_from_last_ckpt(sweep)

    proc = subprocess.run(
        _sweep(sweep, cache), cwd=REPO, env=_env(), capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert _mtimes(sweep / "0") == before  # not re-run, not even its .hydra files rewritten
    resumed = json.loads((sweep / "1" / "metrics.json").read_text())
    assert resumed["status"] == "finished" and resumed["steps"] == STEPS
    _resumed_from_last_ckpt(sweep)
    # each resumed attempt continued the same wandb run; the last one in the sweep's original group
    # (a killed attempt may not have flushed its run record: its group reads None)
    runs = _run_ids(sweep / "1")
    assert len(runs) == 3 and {r for r, _ in runs} == {first_id}
    assert runs[-1][1] == finished["group"] and {g for _, g in runs[:-1]} <= {None, finished["group"]}
    assert group in (None, finished["group"])
    # the CSV log of each stopped attempt is kept; joined, the log covers every logged step once
    log, problems = read_csv_log(sweep / "1" / "csv" / "metrics.csv")
    assert (sweep / "1" / "csv" / "metrics.part-0.csv").is_file()
    assert (sweep / "1" / "csv" / "metrics.part-1.csv").is_file()
    steps = [s for s, _ in log["train/loss"]]
    assert steps == sorted(set(steps)) and steps[0] <= 5 and steps[-1] >= STEPS - 5, steps
