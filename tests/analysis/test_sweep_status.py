"""scripts/status.py on sweep dirs written by hand (issue 37 §1).

Oracle: the files a sweep leaves at a known moment, written here as the trainer and the launchers
write them (metrics.json, Lightning's CSV log with its 0-based `step` column, .hydra, progress.json,
ablation.json), and what a person counts from them: a job that ran 12 steps has done 12, a job
stopped by SIGTERM is interrupted, a job the sweep says it started is running.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

SEEDS = [["seed=1"], ["seed=2"], ["seed=3"], ["seed=4"]]


def job(sweep: Path, num: int, metrics: dict, csv_steps: list[int], max_steps: int = 12) -> None:
    """A job dir: its overrides and config (.hydra), metrics.json, and a CSV log with one train row
    per step in `csv_steps` (Lightning writes the step a row was logged at, counting from 0)."""
    d = sweep / str(num)
    (d / ".hydra").mkdir(parents=True)
    (d / ".hydra" / "overrides.yaml").write_text(f"- seed={num + 1}\n")
    (d / ".hydra" / "config.yaml").write_text(f"trainer:\n  max_steps: {max_steps}\n")
    (d / "metrics.json").write_text(json.dumps(metrics))
    rows = ["epoch,lr,step,train/loss"] + [f"0,0.001,{s},{5.5 - 0.01 * s}" for s in csv_steps]
    (d / "csv").mkdir()
    (d / "csv" / "metrics.csv").write_text("\n".join(rows) + "\n")


def progress(sweep: Path, states: list[str], closed: bool = False) -> None:
    """progress.json as a live sweep of this process on this host writes it."""
    jobs = {
        str(n): {
            "state": s,
            "start": None if s == "pending" else 1000.0,
            "end": None if s in ("pending", "running") else 1010.0,
        }  # fmt: skip
        for n, s in enumerate(states)
    }
    record = {"pid": os.getpid(), "host": socket.gethostname(), "since": 1000.0, "slots": 2,
              "closed": closed, "jobs": jobs}  # fmt: skip
    (sweep / "progress.json").write_text(json.dumps(record))


def status(sweep: Path) -> tuple[dict[str, list[str]], str]:
    """(job → its row's cells, the summary line) as scripts/status.py prints them."""
    proc = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "status.py"), str(sweep)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split()[:3] == ["job", "state", "step"], proc.stdout
    return {row.split()[0]: row.split()[1:] for row in lines[1:-1]}, lines[-1]


def test_the_step_column_counts_steps_done(tmp_path: Path) -> None:
    """A finished 12-step job (CSV rows at steps 0..11, metrics.json steps 12) is `done 12/12`; a
    running one whose CSV reached step 4 has done 5 steps: `running 5/12`; a finished job that logged
    every 5th step (rows at 4 and 9) still ran 12, its metrics.json says so."""
    sweep = tmp_path / "sweep"
    job(sweep, 0, {"status": "finished", "steps": 12}, list(range(12)))
    job(sweep, 1, {"status": "running"}, list(range(5)))
    job(sweep, 2, {"status": "finished", "steps": 12}, [4, 9])
    progress(sweep, ["done", "running", "done", "pending"])
    rows, line = status(sweep)
    assert rows["0"][:2] == ["done", "12/12"], rows
    assert rows["1"][:2] == ["running", "5/12"], rows
    assert rows["2"][:2] == ["done", "12/12"], rows


@pytest.mark.parametrize("launcher_said", ["failed", "interrupted"])
def test_a_job_stopped_by_sigterm_is_interrupted_and_counted_so(tmp_path: Path, launcher_said: str) -> None:
    """Jobs 0, 1 finished; 2, 3 were stopped by the sweep's Ctrl-C (metrics.json `preempted`, as
    the app writes on SIGTERM). Whether progress.json says failed (a launcher before issue 37) or
    interrupted, they are interrupted, and the counts say `2 done, 2 interrupted`."""
    sweep = tmp_path / "sweep"
    for n in (0, 1):
        job(sweep, n, {"status": "finished", "steps": 12}, list(range(12)))
    for n in (2, 3):
        job(sweep, n, {"status": "preempted", "steps": 7, "resume_from": "last.ckpt"}, list(range(7)))
    progress(sweep, ["done", "done", launcher_said, launcher_said], closed=True)
    rows, line = status(sweep)
    assert {k: r[:2] for k, r in rows.items()} == {
        "0": ["done", "12/12"], "1": ["done", "12/12"],
        "2": ["interrupted", "7/12"], "3": ["interrupted", "7/12"],
    }  # fmt: skip
    assert line.startswith("2 done, 0 running, 2 interrupted, 0 pending of 4 |"), line
    assert "failed" not in line


@pytest.mark.parametrize("plan", ["ablation.json", "progress.json only"])
def test_jobs_the_sweep_started_run_before_their_dirs_exist(tmp_path: Path, plan: str) -> None:
    """The first seconds of a 2-slot sweep of 4: it has printed `job 0 started`, `job 1 started`
    (progress.json: 0, 1 running) while the workers still compose, so no job dir exists yet.
    status.py says 2 running, 2 pending, with the plan in ablation.json or with progress.json
    alone; once the sweep is closed the two are interrupted, not running."""
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    if plan == "ablation.json":
        (sweep / "ablation.json").write_text(json.dumps({"jobs": SEEDS}))
    progress(sweep, ["running", "running", "pending", "pending"])
    rows, line = status(sweep)
    assert {k: r[0] for k, r in rows.items()} == {
        "(0)": "running", "(1)": "running", "(2)": "pending", "(3)": "pending",
    }  # fmt: skip
    assert line.startswith("0 done, 2 running, 2 pending of 4 |") and line.endswith("ETA ?"), line
    progress(sweep, ["running", "running", "pending", "pending"], closed=True)
    rows, line = status(sweep)
    assert [r[0] for r in rows.values()] == ["interrupted", "interrupted", "pending", "pending"], rows
    assert line.startswith("0 done, 0 running, 2 interrupted, 2 pending of 4 |"), line


@pytest.mark.parametrize("how", ["closed", "killed", "live"])
def test_elapsed_stops_when_the_sweep_stopped(tmp_path: Path, how: str) -> None:
    """A sweep started 3 hours ago whose last job ended 1,234 s after its start: once it has stopped
    (closed, or its process gone) elapsed is end − start = 1,234 s = 0:20:34, however long ago that
    was; while it lives, elapsed is now − start (3:00:00 and the seconds the script takes)."""
    import time

    sweep = tmp_path / "sweep"
    for n in (0, 1):
        job(sweep, n, {"status": "finished", "steps": 12}, list(range(12)))
    since = time.time() - 3 * 3600
    pid = os.getpid()
    if how == "killed":
        gone = subprocess.Popen([sys.executable, "-c", "pass"])
        gone.wait()  # reaped: its pid names no process
        pid = gone.pid
    jobs = {"0": {"state": "done", "start": since + 1.0, "end": since + 700.0},
            "1": {"state": "done", "start": since + 2.0, "end": since + 1234.0}}  # fmt: skip
    record = {"pid": pid, "host": socket.gethostname(), "since": since, "slots": 2,
              "closed": how == "closed", "jobs": jobs}  # fmt: skip
    (sweep / "progress.json").write_text(json.dumps(record))
    before = time.time()
    _, line = status(sweep)
    after = time.time()
    elapsed = line.split("elapsed ")[1].split(" |")[0]
    if how == "live":
        h, m, s = (int(x) for x in elapsed.split(":"))
        assert before - since - 1 <= 3600 * h + 60 * m + s <= after - since + 1, line
        return
    assert elapsed == "0:20:34", line  # 1234 = 20·60 + 34
    assert line.endswith("| stopped" + ("" if how == "closed" else " (sweep process gone)")), line


def budget_sweep(sweep: Path, states: dict[int, tuple[str, float | None, float | None]], slots: int) -> None:
    """A budget sweep (gptlab.ablation.budgets) by hand: trunks 0, 1 of 12 steps, then branches
    2–5 (budgets 8 and 16: at 6 decay 2, at 12 decay 4); `states`: the current launcher call's
    jobs in progress.json, job → (state, start, end)."""
    trunk = [
        "optim.schedule=wsd",
        "optim.decay_steps=0",
        "optim.branch_points=[6,12]",
        "trainer.max_steps=12",
    ]
    jobs = [[f"seed={s}", *trunk] for s in (1, 2)]
    jobs += [
        [f"seed={s}", f"branch_from={sweep}/{k}", f"branch.at={at}", f"optim.decay_steps={d}",
         f"trainer.max_steps={at + d}"]
        for k, s in ((0, 1), (1, 2)) for at, d in ((6, 2), (12, 4))
    ]  # fmt: skip
    (sweep / "ablation.json").write_text(json.dumps({"jobs": jobs}))
    for k in states:
        (sweep / str(k) / ".hydra").mkdir(parents=True)
        (sweep / str(k) / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in jobs[k]))
        if states[k][0] == "done":
            (sweep / str(k) / "metrics.json").write_text(json.dumps({"status": "finished", "steps": 12}))
    progress_jobs = {str(k): {"state": s, "start": a, "end": b} for k, (s, a, b) in states.items()}
    since = min(a for _, a, _ in states.values())
    record = {"pid": os.getpid(), "host": socket.gethostname(), "since": since, "slots": slots,
              "closed": False, "jobs": progress_jobs}  # fmt: skip
    (sweep / "progress.json").write_text(json.dumps(record))


def eta_of(line: str) -> int:
    h, m, s = line.rsplit("ETA ", 1)[1].split(":")
    return 3600 * int(h) + 60 * int(m) + int(s)


def test_a_budget_sweeps_eta_charges_each_job_its_steps_and_runs_the_branches_after_the_trunks(
    tmp_path: Path,
) -> None:
    """Trunk 0 trained 12 steps in 120 s (10 s a step); trunk 1 has run 50 s of its 120: 70 s left.
    Then the four branches, 2 + 4 + 2 + 4 steps: 120 s on one slot, so the ETA is 190 s (less the
    seconds status.py takes to start). Counting jobs, not steps, and only the trunks' launcher call,
    it would be 70 s."""
    import time

    now = time.time()
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    budget_sweep(sweep, {0: ("done", now - 170, now - 50), 1: ("running", now - 50, None)}, slots=1)
    rows, line = status(sweep)
    assert [r[0] for r in rows.values()] == ["done", "running", "pending", "pending", "pending", "pending"]
    assert 180 <= eta_of(line) <= 190, line
    # the branches' call: 2 and 3 done (2 and 4 steps in 30 s: 5 s a step), 4 running for 5 s of its
    # 10 (2 steps), 5 pending (4 steps, 20 s) on the free slot: 20 s
    sweep = tmp_path / "branches"
    sweep.mkdir()
    budget_sweep(sweep, {0: ("done", now - 400, now - 300), 1: ("done", now - 300, now - 200)}, slots=2)
    progress_jobs = {"2": ("done", now - 60, now - 50), "3": ("done", now - 50, now - 30),
                     "4": ("running", now - 5, None), "5": ("pending", None, None)}  # fmt: skip
    record = json.loads((sweep / "progress.json").read_text())
    record["jobs"] = {k: {"state": s, "start": a, "end": b} for k, (s, a, b) in progress_jobs.items()}
    (sweep / "progress.json").write_text(json.dumps(record))
    rows, line = status(sweep)
    assert 15 <= eta_of(line) <= 20, line
