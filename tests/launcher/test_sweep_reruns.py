"""A sweep stopped and run again (hydra/launcher=slots and array_local, in real processes): SIGTERM to
a sweep checkpoints every running job and a re-run resumes them; a re-run fills the gaps of a finished
sweep job by job; an array task retried over its unfinished run resumes from last.ckpt.

Split from test_parallel_sweeps.py so that pytest-xdist's --dist loadfile can run the two halves on
different workers (each file runs whole on one).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from gptlab.ablation.grid import grid_identity
from tests.cli_here import train_py_run_here
from tests.conftest import QUICK_ENV, REPO, run_script
from tests.launcher.test_parallel_sweeps import _losses
from tests.training.rel_harness import TINY as HERE_TINY
from tests.training.rel_harness import train_here
from tests.waiting import SUITE_LIMIT_S, ended, wait_until


def _descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = set(), [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            found.add(c)
            todo.append(c)
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.slow
def test_sigterm_to_the_sweep_checkpoints_every_running_job_and_a_rerun_resumes(tmp_path: Path) -> None:
    """Two jobs (one seed, one LR, both arms) in two slots, both training when the sweep gets SIGTERM:
    each running job saves last.ckpt, no process is left, the sweep exits 143; the re-run resumes them
    to the end. Nothing here reads the report or a task score: neither is made."""
    out = tmp_path / "sweep"
    cmd = [
        sys.executable, str(REPO / "train.py"), "-m", "experiment=ablate_tying_quick",
        "hydra.sweeper.seeds=1", "hydra.sweeper.lr.points=1", "hydra.sweeper.lr.max=1.0e-3",
        "trainer.max_steps=400", "trainer.val_check_interval=400", "hydra.sweeper.report=false",
        f"hydra.sweep.dir={out}", "logger=csv", "callbacks.tasks.names=[]",
        "hydra.launcher.slots=2", "hydra.launcher.threads=1", "sample.max_new_tokens=0",
    ]  # fmt: skip
    env = {**os.environ, **QUICK_ENV, "WANDB_MODE": "offline"}
    sweep = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:  # both slots busy, past the start of fit (csv rows written)
        wait_until(
            lambda: (
                len([p for p in out.glob("*/csv/metrics.csv") if len(p.read_text().splitlines()) > 2]) >= 2
            ),
            "both slots' jobs to train",
            gone=ended(sweep),
        )
    except AssertionError:
        sweep.kill()
        raise
    pids = _descendants(sweep.pid)
    assert len(pids) >= 2
    sweep.send_signal(signal.SIGTERM)
    _, err = sweep.communicate(timeout=SUITE_LIMIT_S)
    assert sweep.returncode == 143, err[-3000:]
    assert not [p for p in pids if _alive(p)]  # no job trains on as an orphan
    states = {
        d.name: json.loads((d / "metrics.json").read_text())["status"]
        for d in out.iterdir()
        if d.name.isdigit()
    }
    preempted = [k for k, s in states.items() if s == "preempted"]
    assert len(preempted) >= 1 and set(states.values()) <= {"preempted", "finished"}
    for k in preempted:
        assert (out / k / "checkpoints" / "last.ckpt").is_file()
    rerun = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    for k in preempted:
        assert f"job {k}: re-launched with ckpt_path=" in rerun.stdout + rerun.stderr
    final = {d.name: json.loads((d / "metrics.json").read_text()) for d in out.iterdir() if d.name.isdigit()}
    assert sorted(final) == ["0", "1"]
    assert all(m["status"] == "finished" and m["steps"] == 400 for m in final.values())


@pytest.mark.slow
def test_rerun_with_gaps_puts_each_job_in_its_own_numbered_dir(
    quick_tying_sweep: Path, tmp_path: Path
) -> None:
    """Jobs 1 and 5 of a finished sweep are gone (never ran): the re-run launches both in one call,
    and each lands in its own directory with its own overrides, number and loss, not in 1 and 2."""
    out = tmp_path / "sweep"
    shutil.copytree(quick_tying_sweep, out)
    for k in ("1", "5"):
        shutil.rmtree(out / k)
    before = {k: (out / k / "metrics.json").stat().st_mtime_ns for k in ("0", "2", "3", "4", "6", "7")}
    cache = quick_tying_sweep.parent.parent / "token-cache"
    proc = train_py_run_here(  # one slot: the jobs in the sweep's process, this one (tests/cli_here.py)
        "-m", "experiment=ablate_tying_quick", f"hydra.sweep.dir={out}", f"data.cache_dir={cache}",
        "hydra.sweeper.report=false", env=QUICK_ENV,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    for k in ("1", "5"):
        ours = out / k / ".hydra"
        theirs = quick_tying_sweep / k / ".hydra" / "overrides.yaml"
        # the re-run adds logger.group=<the sweep's original group>: how it ran, not which job it is
        mine = grid_identity(yaml.safe_load((ours / "overrides.yaml").read_text()))
        assert mine == grid_identity(yaml.safe_load(theirs.read_text()))
        assert yaml.safe_load((ours / "hydra.yaml").read_text())["hydra"]["job"]["num"] == int(k)
    assert _losses(out) == _losses(quick_tying_sweep)
    assert {k: (out / k / "metrics.json").stat().st_mtime_ns for k in before} == before  # untouched


@pytest.mark.slow
def test_an_array_task_retried_over_its_unfinished_run_resumes_from_last_ckpt(tmp_path: Path) -> None:
    """What a requeued SLURM array task meets: its job directory holds a run that stopped (status
    preempted, last.ckpt at step 10). A plain multirun through hydra/launcher=array_local, which adds
    no ckpt_path itself, resumes it from that checkpoint instead of starting over."""
    out, cache = tmp_path / "sweep", tmp_path / "cache"
    common = [*HERE_TINY, "trainer.val_check_interval=5", f"data.cache_dir={cache}"]
    # the run that stopped: made in this process (what it leaves in its directory is the point here,
    # not how it was started)
    train_here(out / "0", cache, "trainer.val_check_interval=5", "trainer.max_steps=10")
    metrics = out / "0" / "metrics.json"
    metrics.write_text(json.dumps({**json.loads(metrics.read_text()), "status": "preempted"}))
    assert (out / "0" / "checkpoints" / "last.ckpt").is_file()
    again = run_script(
        "train.py", "-m", *common, "trainer.max_steps=20", "hydra/launcher=array_local",
        f"hydra.sweep.dir={out}", timeout=600,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr[-3000:]
    logs = [p for p in (out / ".submitit").rglob("*") if p.suffix in (".out", ".err")]
    log = "".join(p.read_text() for p in logs) + again.stdout + again.stderr
    assert "job 0: its directory holds an unfinished run; resuming from" in log
    final = json.loads(metrics.read_text())
    assert final["status"] == "finished" and final["steps"] == 20
    job_log = "".join(p.read_text() for p in (out / "0").glob("*.log"))
    assert "Restored all states from the checkpoint" in job_log  # Lightning's: not a fresh start
