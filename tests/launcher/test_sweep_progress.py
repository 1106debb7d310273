"""The sweep's status lines and scripts/status.py.

Oracles: a hand-made schedule with known job times (what a clock on the wall would say), and a real
2-slot sweep of tiny jobs read while it runs and after it was killed with SIGKILL.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from gptlab.analysis.sweep.status import NotASweep, read_status
from gptlab.launcher.progress import SweepProgress, eta_seconds
from tests.conftest import REPO, TINY
from tests.waiting import wait_until


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_eta_is_the_list_schedule_of_the_mean_job_time() -> None:
    """Worked by hand: mean 10 s, 2 slots. One job 4 s into its run and 3 waiting: the running one
    frees its slot at 6, the other slot takes a job 0→10, the freed one 6→16, then 10→20: 20 s."""
    assert eta_seconds([8.0, 12.0], [4.0], 3, 2) == pytest.approx(20.0)
    assert eta_seconds([10.0], [], 1, 2) == pytest.approx(10.0)  # one job left: not 10 / 2
    assert eta_seconds([10.0], [25.0], 0, 2) == 0.0  # an overdue job is not negative time
    assert eta_seconds([], [1.0], 3, 2) is None  # nothing finished: no estimate


def test_status_lines_count_jobs_and_estimate_from_finished_times(tmp_path: Path) -> None:
    """5 jobs of 10 s on 2 slots, started as slots free: the ETA each line gives is the time the
    schedule still needs (known here), the counts those of the moment; a job whose metrics.json
    says failed counts as failed even though its launcher saw it return."""
    clock, lines = Clock(), []
    p = SweepProgress(tmp_path, [0, 1, 2, 3, 4], slots=2, emit=lines.append, now=clock)
    p.started(0)
    p.started(1)
    clock.t += 10
    p.ended(0, ok=True)  # 1 still running (age 10 = mean: frees now); 2, 3, 4 pending: 10 + 10
    assert lines[-1].endswith("1 done, 1 running, 0 failed, 3 pending of 5 | elapsed 0:00:10 | ETA 0:00:20")
    (tmp_path / "1").mkdir()
    (tmp_path / "1" / "metrics.json").write_text(json.dumps({"status": "failed", "error": "bad key"}))
    p.ended(1, ok=True)
    assert "job 1 FAILED" in lines[-1] and "1 done, 0 running, 1 failed, 3 pending" in lines[-1]
    p.started(2)
    p.started(3)
    clock.t += 4
    assert p.line().endswith("elapsed 0:00:14 | ETA 0:00:16")  # 2, 3 free at 6, 4 runs 6→16
    assert lines[0].startswith("[sweep] job 0 started | 0 done, 1 running, 0 failed, 4 pending of 5")
    record = json.loads((tmp_path / "progress.json").read_text())
    assert record["pid"] == os.getpid() and record["slots"] == 2
    assert {k: v["state"] for k, v in record["jobs"].items()} == {
        "0": "done", "1": "failed", "2": "running", "3": "running", "4": "pending",
    }  # fmt: skip
    rows, line = read_status(tmp_path, now=clock.t)  # no job dirs but 1's: the others read pending
    assert line.endswith("| ETA 0:00:16")


def _status(sweep: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(REPO / "scripts" / "status.py"), str(sweep)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def _states(out: str) -> dict[str, str]:
    rows = [line.split() for line in out.splitlines()[1:-1]]
    return {r[0]: r[1] for r in rows}


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(c) for c in (task / "children").read_text().split()]
    return found


def elapsed(status: str) -> int:
    """The seconds of a status line's `elapsed h:mm:ss`."""
    m = re.search(r"elapsed (\d+):(\d\d):(\d\d)", status.splitlines()[-1])
    assert m, status
    h, mi, sec = map(int, m.groups())
    return 3600 * h + 60 * mi + sec


@pytest.mark.slow
def test_status_of_a_real_two_slot_sweep_while_it_runs_and_after_kill_9(tmp_path: Path) -> None:
    """Two slots, four long tiny jobs: status.py shows two running (with a step of the max and,
    after the first validation, a val loss) and two pending; after SIGKILL to the sweep and its
    workers (a node going away), the jobs that were running show as interrupted, not running."""
    sweep = tmp_path / "sweep"
    log = (tmp_path / "out.txt").open("w")
    env = {**os.environ, "WANDB_MODE": "disabled", "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        [sys.executable, str(REPO / "train.py"), "-m", *TINY, "seed=1,2,3,4", "trainer.max_steps=100000",
         "trainer.val_check_interval=5", "data.val_windows=8", "hydra.launcher.slots=2",
         "hydra.launcher.threads=1", f"hydra.sweep.dir={sweep}", f"data.cache_dir={tmp_path / 'cache'}"],
        cwd=REPO, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True,
    )  # fmt: skip
    try:

        def both_running_with_a_val_loss() -> bool:
            # polled in this process (status.py's own reading, without a process start per poll);
            # the script itself is then run once, when this says it has something to show
            try:
                rows, _ = read_status(sweep)
            except NotASweep:  # the sweep has not made its dir yet
                return False
            running = [r for r in rows if r.state == "running"]
            return len(running) == 2 and all(r.val_loss is not None for r in running)

        def sweep_gone() -> str | None:
            return None if proc.poll() is None else (tmp_path / "out.txt").read_text()[-3000:]

        wait_until(both_running_with_a_val_loss, "two running jobs with a val loss", gone=sweep_gone)
        out = _status(sweep).stdout
        states = _states(out)
        vals = [r for r in out.splitlines()[1:-1] if r.split()[1] == "running" and r.split()[3] != "-"]
        assert len(vals) == 2, out  # what the script shows: both running jobs with a val loss
        assert sorted(states.values()) == ["pending", "pending", "running", "running"], out
        for row in out.splitlines()[1:-1]:
            if row.split()[1] == "running":
                step, most = row.split()[2].split("/")
                assert most == "100000" and int(step) >= 5, row
        assert re.search(r"0 done, 2 running, 2 pending of 4 \| elapsed \d:\d\d:\d\d \| ETA \?$", out), out
        workers = _children(proc.pid)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
    for w in workers:  # the slots' workers are process groups of their own
        try:
            os.killpg(w, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait()
    after = _status(sweep)
    assert after.returncode == 0, after.stderr
    assert sorted(_states(after.stdout).values()) == ["interrupted", "interrupted", "pending", "pending"]
    assert "(sweep process gone; elapsed to its jobs' last write)" in after.stdout.splitlines()[-1]
    # elapsed runs to the killed jobs' last write, not to the last recorded end (none here: 0:00:00)
    assert elapsed(after.stdout) >= elapsed(out) > 0, (out, after.stdout)
    printed = (tmp_path / "out.txt").read_text()
    assert re.search(r"\[sweep\] job 1 started \| 0 done, 2 running, 0 failed, 2 pending of 4", printed)
    for k in ("0", "1"):  # each job's own output went to its dir, not to the sweep's terminal
        assert "[gptlab.data.packing][INFO]" in (sweep / k / "output.log").read_text()
    assert "[gptlab." not in printed and "Traceback" not in printed, printed[-2000:]


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: p / "nowhere", "is not a directory"),
        (lambda p: p, "is not a sweep dir: it holds none of ablation.json, multirun.yaml, progress.json"),
    ],
    ids=["missing", "not_a_sweep"],
)
def test_status_refuses_a_dir_that_is_no_sweep(tmp_path: Path, make, message: str) -> None:
    (tmp_path / "notes.txt").write_text("x")
    proc = _status(make(tmp_path))
    assert proc.returncode == 2 and message in proc.stderr and proc.stdout == ""
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr


ARRAY_CONFIG = """\
defaults:
  - _self_
  - override hydra/launcher: submitit_local
trainer: {accelerator: cpu, devices: 1}
sleep: 1.0
x: 0
crash_at: -1
barrier: 0
hydra:
  launcher:
    _target_: hydra_plugins.gptlab_launchers.submitit_array.LocalArrayLauncher
  sweep:
    dir: ${oc.env:PROBE_SWEEP_DIR}
"""


@pytest.mark.slow
def test_a_submitit_array_reports_each_task_start_and_end(tmp_path: Path) -> None:
    """The array path (submitit's local executor, real subprocesses): three start lines, three end
    lines, and the task that raised counted as failed (its JobReturn says so, not its exit)."""
    (tmp_path / "config.yaml").write_text(ARRAY_CONFIG)
    env = {**os.environ, "PROBE_SWEEP_DIR": str(tmp_path / "s")}
    proc = subprocess.run(
        [sys.executable, str(REPO / "tests" / "launcher" / "probe_app" / "app.py"), "--config-path",
         str(tmp_path), "-m", "x=0,1,2", "crash_at=1"],
        capture_output=True, text=True, timeout=180, env=env, cwd=tmp_path,
    )  # fmt: skip
    printed = (proc.stdout + proc.stderr).splitlines()
    lines = [line.split("[sweep] ", 1)[1] for line in printed if "[sweep] " in line]
    assert sorted(line.split(" |")[0] for line in lines if "started" in line) == [
        f"job {n} started" for n in range(3)
    ], proc.stderr[-2000:]
    assert re.search(r"^job 1 FAILED after", "\n".join(lines), re.M), lines
    assert "| 2 done, 0 running, 1 failed, 0 pending of 3 | elapsed" in lines[-1]
    record = json.loads((tmp_path / "s" / "progress.json").read_text())
    assert record["closed"] and [j["state"] for j in record["jobs"].values()] == ["done", "failed", "done"]


def _csv_steps(job_dir: Path) -> list[int]:
    """The `step` cells of the job's CSV rows that hold a train loss, read with the csv module."""
    import csv

    with (job_dir / "csv" / "metrics.csv").open() as f:
        return [int(r["step"]) for r in csv.DictReader(f) if r.get("train/loss")]


@pytest.mark.slow  # the session's quick sweep (shared); status.py itself ~1 s
def test_status_counts_steps_done_not_the_csv_zero_based_step(quick_tying_sweep: Path) -> None:
    """A real serial multirun's job (the session's quick tying sweep: 12 steps, a train row every
    3rd): status.py shows 12/12, the train rows of its CSV times the log cadence and its
    metrics.json steps, not the last row's 0-based step (11)."""
    rows = _csv_steps(quick_tying_sweep / "0")
    done = json.loads((quick_tying_sweep / "0" / "metrics.json").read_text())["steps"]
    # the oracle: rows counted at the preset's cadence (trainer.log_every_n_steps=3), the job's word
    assert 3 * len(rows) == done == 12 and rows == [2, 5, 8, 11], rows
    out = _status(quick_tying_sweep).stdout
    assert out.splitlines()[1].split()[:3] == ["0", "done", "12/12"], out


def test_jobs_a_stopped_sweep_ended_are_interrupted_in_its_lines_and_in_status(tmp_path: Path) -> None:
    """Ctrl-C to a 2-slot sweep of 4: jobs 0, 1 finished, then 2, 3 were stopped by SIGTERM. Their
    metrics.json says preempted (written by the app's own `write_status`, as it does on SIGTERM) and
    the pool saw exit 143 (not ok): the lines, progress.json and status.py all say interrupted."""
    from gptlab.analysis.sweep.jobs import read_job
    from gptlab.analysis.sweep.status import job_state
    from gptlab.training.app import write_status

    clock, lines = Clock(), []
    p = SweepProgress(tmp_path, [0, 1, 2, 3], slots=2, emit=lines.append, now=clock)
    for num, status in ((0, "finished"), (1, "finished"), (2, "preempted"), (3, "preempted")):
        p.started(num)
        (tmp_path / str(num)).mkdir()
        write_status(tmp_path / str(num), {"status": "running"})
        clock.t += 5
        write_status(tmp_path / str(num), {"status": status, "steps": 7})
        p.ended(num, ok=status == "finished")
    p.close()
    own = {n: json.loads((tmp_path / str(n) / "metrics.json").read_text())["status"] for n in range(4)}
    assert own == {0: "finished", 1: "finished", 2: "preempted", 3: "preempted"}  # the jobs' own word
    assert re.search(r"job 3 interrupted after 0:00:05 \| 2 done, 0 running, 0 failed, 2 interrupted, "
                     r"0 pending of 4", lines[-1]), lines[-1]  # fmt: skip
    assert not any("FAILED" in line for line in lines), lines
    record = json.loads((tmp_path / "progress.json").read_text())
    assert [j["state"] for j in record["jobs"].values()] == ["done", "done", "interrupted", "interrupted"]
    rows, line = read_status(tmp_path)
    assert [r.state for r in rows] == ["done", "done", "interrupted", "interrupted"]
    assert line.startswith("2 done, 0 running, 2 interrupted, 0 pending of 4 |"), line
    # progress.json from before this fix called them failed: the job's own word still wins
    assert job_state(read_job(tmp_path / "2"), "failed", False) == "interrupted"
