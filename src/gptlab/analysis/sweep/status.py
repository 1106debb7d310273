"""The table `scripts/status.py` prints: every job of a sweep with its state, step, last val loss.

Read from files only (progress.json from the launcher, each job's metrics.json, CSV log and Hydra
config), so it works from any shell, also on a login node while the jobs run elsewhere. A job that
says `running` is shown as running only while its sweep is alive: progress.json names the sweep's
pid and host, and a dead pid on this host (a sweep killed with SIGKILL) or a closed sweep makes its
unfinished jobs `interrupted`. On another host the pid cannot be checked and the job's word is taken.
"""

from __future__ import annotations

import heapq
import json
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from gptlab.analysis.sweep.jobs import Job, read_sweep
from gptlab.launcher.progress import PROGRESS, clock, eta_seconds
from gptlab.wsd import run_steps

STATES = ("done", "diverged", "running", "failed", "interrupted", "pending")


class NotASweep(ValueError):
    """The directory holds no sweep: one line naming it and what is expected."""


@dataclass
class Row:
    job: str
    state: str
    step: int | None
    max_steps: int | None
    val_loss: float | None
    what: str


def read_progress(sweep_dir: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((sweep_dir / PROGRESS).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: alive
    return True


def sweep_alive(progress: dict[str, Any] | None) -> bool | None:
    """True / False when it can be told from here; None without progress.json or on another host."""
    if progress is None:
        return None
    if progress.get("closed"):
        return False
    if progress.get("host") != socket.gethostname():
        return None
    return pid_alive(int(progress.get("pid", -1)))


def max_steps(job: Job) -> int | None:
    """The job's length from its composed config (.hydra/config.yaml): trainer.max_steps, or a
    decay branch's branch.at + optim.decay_steps (gptlab.wsd.run_steps)."""
    if job.path is None:
        return None
    try:
        cfg = yaml.safe_load((job.path / ".hydra" / "config.yaml").read_text()) or {}
        return run_steps(cfg)
    except (OSError, yaml.YAMLError, AttributeError):
        return None


def job_state(job: Job, launcher_state: str | None, alive: bool | None) -> str:
    """One of STATES from the job's own record, the launcher's word and whether the sweep lives.

    A job stopped by SIGTERM (metrics.json `preempted`: the sweep's Ctrl-C or SIGTERM, a SLURM
    preemption) is `interrupted`, also where an older progress.json called it failed: it resumes
    from its checkpoint. A job with no dir yet is `running` once the launcher said it started (its
    worker is still composing), so the counts match the sweep's own lines from the first second."""
    if job.path is None:
        if launcher_state == "running":
            return "interrupted" if alive is False else "running"
        return launcher_state if launcher_state in ("failed", "interrupted") else "pending"
    if job.status in ("finished",):
        return "done"
    if job.status == "diverged":
        return "diverged"
    if job.status == "preempted" or launcher_state == "interrupted":  # its own word comes first
        return "interrupted"
    if job.status == "failed" or launcher_state == "failed":
        return "failed"
    # running, or no metrics.json yet (composing, or killed before writing it)
    if alive is False:
        return "interrupted"
    return "running"


def steps_done(job: Job) -> int | None:
    """Optimizer steps the job has done: metrics.json's `steps` once it ended (the trainer's own
    count), else one more than the CSV log's last `step` (that column is 0-based, the step a row
    was logged at: a 12-step job's last row says 11)."""
    steps = (job.metrics or {}).get("steps")
    if isinstance(steps, int) and not isinstance(steps, bool):
        return steps
    last = job.last_step()
    return None if last is None else last + 1


def last_val_loss(job: Job) -> float | None:
    series = job.log.get("val/loss") or []
    if series:
        return series[-1][1]
    return job.metric("final_val_loss")


def swept_keys(jobs: list[Job]) -> set[str]:
    """The override keys whose values differ between jobs: what tells one job from another."""
    seen: dict[str, set[str]] = {}
    for job in jobs:
        for k, v in job.values.items():
            seen.setdefault(k, set()).add(v)
    n = len(jobs)
    return {k for k, vs in seen.items() if len(vs) > 1 or sum(k in j.values for j in jobs) < n}


def describe(job: Job, keys: set[str]) -> str:
    """The job's swept overrides; a budgets sweep's trunk says `trunk`, a branch `branch of job <k>`
    in place of its trunk's directory (gptlab.ablation.budgets)."""
    values = job.values
    words = [
        f"{k}={v}" for k, v in values.items() if k in keys - {"branch_from"} and not k.startswith("hydra.")
    ]
    if values.get("branch_from"):
        words.insert(0, f"branch of job {Path(values['branch_from']).name}")
    elif values.get("optim.branch_points"):
        words.insert(0, "trunk")
    return " ".join(words)


def launcher_key(job: Job) -> str:
    """The job's key in progress.json (its number): a job dir's name, or `(k)` for the k-th planned
    job that has no dir yet."""
    return job.name[1:-1] if job.path is None and job.name.startswith("(") else job.name


def unlisted_jobs(jobs: list[Job], launched: dict[str, Any]) -> list[Job]:
    """Jobs progress.json knows that neither a dir nor the sweep's plan lists (a sweeper whose
    trials are decided as they go, or the first seconds before multirun.yaml is read)."""
    known = {launcher_key(j) for j in jobs}
    extra = [k for k in launched if k not in known]
    return [Job(name=f"({k})", path=None, overrides=[], status="not started") for k in extra]


def read_status(sweep_dir: str | Path, now: float | None = None) -> tuple[list[Row], str]:
    """(one row per job, the summary line with counts, elapsed and ETA)."""
    root = Path(sweep_dir)
    if not root.is_dir():
        raise NotASweep(f"{str(root)!r} is not a directory; give a sweep dir (multirun/<...>)")
    progress = read_progress(root)
    markers = ("ablation.json", "multirun.yaml", PROGRESS)
    if not any((root / m).is_file() for m in markers):
        raise NotASweep(
            f"{str(root)!r} is not a sweep dir: it holds none of {', '.join(markers)}; "
            "give the hydra.sweep.dir of a `train.py -m` run"
        )
    now = time.time() if now is None else now
    alive = sweep_alive(progress)
    launched = (progress or {}).get("jobs", {})
    rows = []
    jobs = read_sweep(root)
    keys = swept_keys(jobs)
    for job in jobs + unlisted_jobs(jobs, launched):
        word = (launched.get(launcher_key(job)) or {}).get("state")
        state = job_state(job, word, alive)
        rows.append(
            Row(job.name, state, steps_done(job), max_steps(job), last_val_loss(job), describe(job, keys))
        )
    running = [j for j in jobs if (launched.get(launcher_key(j)) or {}).get("state") == "running"]
    line = status_line(rows, progress, alive, now, last_write(running))
    if progress is not None and alive is not False and any(j.values.get("branch_from") for j in jobs):
        line = line.rsplit(" | ETA ", 1)[0] + f" | ETA {clock(budget_eta(jobs, rows, progress, now))}"
    return rows, line


def trained_steps(job: Job) -> int | None:
    """The steps a job trains: trainer.max_steps, less a branch's point (it starts from the
    trunk's checkpoint there); None when its overrides do not say."""
    values = job.values
    try:
        return int(values["trainer.max_steps"]) - int(values.get("branch.at", 0))
    except (KeyError, ValueError):
        return None


def _schedule(free: list[float], times: list[float]) -> float:
    """When the last of `times` ends, each taking the slot that frees first (free: when each slot
    frees)."""
    heap = list(free)
    heapq.heapify(heap)
    for t in times:
        heapq.heappush(heap, heapq.heappop(heap) + t)
    return max(heap, default=0.0)


def budget_eta(jobs: list[Job], rows: list[Row], progress: dict[str, Any], now: float) -> float | None:
    """A budget sweep's ETA (gptlab.ablation.budgets): jobs of very different lengths (a trunk runs
    to its last branch point, a branch only its decay) in two launcher calls, the branches after
    every trunk. Each job is charged its trained steps × the seconds a step took over the finished
    jobs of the current call (progress.json holds that call's jobs); the current call's running and
    pending jobs are scheduled on its slots, then the jobs it does not hold and that have not run
    (the branches, while the trunks run) from the moment its last job ends. None before a job of
    the current call has finished, or when a job's length is unknown."""
    launched = progress.get("jobs", {})
    keys = [launcher_key(j) for j in jobs]
    work = {k: trained_steps(j) for k, j in zip(keys, jobs, strict=True)}
    done = [j for k, j in launched.items() if j.get("state") == "done" and j.get("start") and j.get("end")]
    done_keys = [k for k, j in launched.items() if j in done]
    running = [k for k, j in launched.items() if j.get("state") == "running" and j.get("start")]
    pending = [k for k, j in launched.items() if j.get("state") == "pending"]
    later = [k for k, r in zip(keys, rows, strict=False) if r.state == "pending" and k not in launched]
    steps = [work.get(k) for k in done_keys + running + pending + later]
    if not done or any(n is None for n in steps):
        return None
    known = {k: int(n) for k, n in work.items() if n is not None}
    rate = sum(j["end"] - j["start"] for j in done) / max(1, sum(known[k] for k in done_keys))
    slots = max(1, int(progress.get("slots", 1)))
    free = [max(known[k] * rate - (now - launched[k]["start"]), 0.0) for k in running]
    free += [0.0] * max(0, slots - len(free))
    end = _schedule(free, [known[k] * rate for k in pending])
    return _schedule([end] * slots, [known[k] * rate for k in later]) if later else end


def last_write(jobs: list[Job]) -> float | None:
    """When these jobs last wrote their log or metrics (file mtimes): a sweep killed outright records
    no end for the jobs it was running, which ran until about then."""
    files = [
        j.path / name for j in jobs if j.path for name in ("output.log", "csv/metrics.csv", "metrics.json")
    ]
    times = [f.stat().st_mtime for f in files if f.is_file()]
    return max(times, default=None)


def status_line(
    rows: list[Row],
    progress: dict[str, Any] | None,
    alive: bool | None,
    now: float,
    written: float | None = None,
) -> str:
    """`3 done, 2 running, ... of 12 | elapsed 0:12:30 | ETA 0:25:00` (ETA from progress.json's
    finished jobs' times; '-' once the sweep has stopped)."""
    count = {s: sum(r.state == s for r in rows) for s in STATES}
    parts = [f"{count[s]} {s}" for s in STATES if count[s] or s in ("done", "running", "pending")]
    text = ", ".join(parts) + f" of {len(rows)}"
    if progress is None:
        return text + " | no progress.json (started before gptlab wrote one, or by another launcher)"
    jobs = progress.get("jobs", {}).values()
    ends = [j["end"] for j in jobs if j.get("end")]
    since = float(progress.get("since", now))
    gone = alive is False and not progress.get("closed")  # killed: its running jobs' ends are not recorded
    late = gone and written is not None  # jobs it was running wrote until about `written`
    last = now if alive is not False else max([*ends, since, *([written] if late else [])])
    text += f" | elapsed {clock(last - since)}"
    if alive is False:
        why = " (sweep process gone; elapsed to its jobs' last write)" if late else " (sweep process gone)"
        return text + " | stopped" + (why if gone else "")
    durations = [
        j["end"] - j["start"] for j in jobs if j.get("state") == "done" and j.get("start") and j.get("end")
    ]
    ages = [now - j["start"] for j in jobs if j.get("state") == "running" and j.get("start")]
    pending = sum(j.get("state") == "pending" for j in jobs)
    eta = eta_seconds(durations, ages, pending, int(progress.get("slots", 1)))
    return text + f" | ETA {clock(eta)}"


def table(rows: list[Row]) -> str:
    """The job table as aligned text."""
    head = ("job", "state", "step", "val loss", "overrides")
    body = [
        (
            r.job,
            r.state,
            f"{'-' if r.step is None else r.step}/{'?' if r.max_steps is None else r.max_steps}",
            "-" if r.val_loss is None else f"{r.val_loss:.4f}",
            r.what,
        )
        for r in rows
    ]
    widths = [max(len(str(x[i])) for x in [head, *body]) for i in range(len(head) - 1)]
    lines = []
    for cells in [head, *body]:
        lines.append(
            "  ".join(str(c).ljust(w) for c, w in zip(cells, widths, strict=False)) + "  " + cells[-1]
        )
    return "\n".join(line.rstrip() for line in lines)
