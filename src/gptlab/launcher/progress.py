"""Where a sweep is: one status line per job start and end, and progress.json for other shells.

Every launcher (slots, serial, submitit arrays) reports the same two events, `started(num)` and
`ended(num)`; this module keeps the count (done / running / failed / pending of total), the elapsed
time and an ETA, logs one line per event, and rewrites `<sweep dir>/progress.json` atomically so
`scripts/status.py` can show the same from any shell while the sweep runs. progress.json also holds
the sweep's pid and host: a sweep killed outright (SIGKILL) cannot say so, and a reader on the same
host then sees a dead pid and shows its running jobs as interrupted (gptlab.launcher.status).
"""

from __future__ import annotations

import heapq
import json
import logging
import os
import socket
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

PROGRESS = "progress.json"
PENDING, RUNNING, DONE, FAILED = "pending", "running", "done", "failed"
INTERRUPTED = "interrupted"  # stopped by SIGTERM (Ctrl-C to the sweep, preemption): resumable


@dataclass
class JobTimes:
    state: str = PENDING
    start: float | None = None
    end: float | None = None


def eta_seconds(durations: list[float], running_ages: list[float], pending: int, slots: int) -> float | None:
    """Seconds until the last job ends if every job takes the mean of the finished ones' times.

    List scheduling, as the launchers do it: each running job frees its slot after (mean − its age,
    at least 0), each pending job takes the slot that frees first. Exact when all jobs take the same
    time; None before any job finished (nothing to estimate from).
    """
    if not durations:
        return None
    mean = sum(durations) / len(durations)
    slots = max(1, slots, len(running_ages))
    free = [max(mean - age, 0.0) for age in running_ages] + [0.0] * (slots - len(running_ages))
    heapq.heapify(free)
    for _ in range(pending):
        heapq.heappush(free, heapq.heappop(free) + mean)
    return max(free)


def clock(seconds: float | None) -> str:
    """H:MM:SS (or '?' when unknown)."""
    if seconds is None:
        return "?"
    s = int(round(seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def job_outcome(job_dir: Path, launcher_ok: bool) -> str:
    """DONE, FAILED or INTERRUPTED: a job whose metrics.json says failed (a bad setting returns
    normally in a multirun, so the launcher sees success) failed, unless it diverged, which is a
    result; one that says preempted was stopped by SIGTERM (the sweep's Ctrl-C or SIGTERM reaches
    every running job so) and resumes from its checkpoint when the sweep is run again."""
    try:
        metrics = json.loads((job_dir / "metrics.json").read_text())
    except (OSError, ValueError):
        metrics = {}
    status = metrics.get("status") if isinstance(metrics, dict) else None
    if status == "failed" and not metrics.get("diverged"):
        return FAILED
    if status == "preempted":
        return INTERRUPTED
    if status == "running":  # killed before it could write its end: it did not stop cleanly
        return FAILED
    return DONE if launcher_ok else FAILED


def summary_line(jobs: dict[int, JobTimes], total: int, slots: int, since: float, now: float) -> str:
    """`3 done, 2 running, 1 failed, 6 pending of 12 | elapsed 0:12:30 | ETA 0:25:00` (and
    `N interrupted` after `failed` once a job was stopped)."""
    count = {s: sum(j.state == s for j in jobs.values()) for s in (DONE, RUNNING, FAILED, INTERRUPTED)}
    pending = total - sum(count.values())
    stopped = f"{count[INTERRUPTED]} interrupted, " if count[INTERRUPTED] else ""
    durations = [j.end - j.start for j in jobs.values() if j.state == DONE and j.end and j.start]
    ages = [now - j.start for j in jobs.values() if j.state == RUNNING and j.start]
    eta = eta_seconds(durations, ages, pending, slots) if pending + count[RUNNING] else 0.0
    return (
        f"{count[DONE]} done, {count[RUNNING]} running, {count[FAILED]} failed, {stopped}{pending} pending "
        f"of {total} | elapsed {clock(now - since)} | ETA {clock(eta)}"
    )


class SweepProgress:
    """The launchers' shared reporter: call `started(num)` and `ended(num, ok)`; `close()` at the end."""

    def __init__(
        self,
        sweep_dir: str | os.PathLike,
        nums: list[int],
        slots: int,
        emit: Callable[[str], None] | None = None,
        now: Callable[[], float] = time.time,
    ) -> None:
        self.dir = Path(sweep_dir)
        self.jobs = {n: JobTimes() for n in nums}
        self.slots = max(1, slots)
        self.emit = emit or log.info
        self.now = now
        self.since = now()
        self.closed = False
        self._write()

    def line(self) -> str:
        return summary_line(self.jobs, len(self.jobs), self.slots, self.since, self.now())

    def started(self, num: int) -> None:
        job = self.jobs.setdefault(num, JobTimes())
        job.state, job.start = RUNNING, self.now()
        self._event(f"job {num} started")

    def ended(self, num: int, ok: bool) -> None:
        job = self.jobs.setdefault(num, JobTimes())
        job.end = self.now()
        job.start = job.start if job.start is not None else job.end
        job.state = job_outcome(self.dir / str(num), ok)
        word = {DONE: "finished", INTERRUPTED: "interrupted"}.get(job.state, "FAILED")
        self._event(f"job {num} {word} after {clock(job.end - job.start)}")

    def close(self) -> None:
        self.closed = True
        self._write()

    def _event(self, what: str) -> None:
        self._write()
        self.emit(f"[sweep] {what} | {self.line()}")

    def _write(self) -> None:
        data: dict[str, Any] = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "since": self.since,
            "slots": self.slots,
            "closed": self.closed,
            "jobs": {str(n): asdict(j) for n, j in sorted(self.jobs.items())},
        }
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            tmp = self.dir / f"{PROGRESS}.{os.getpid()}.tmp"  # torchrun: every rank runs the sweep
            tmp.write_text(json.dumps(data, indent=1) + "\n")
            os.replace(tmp, self.dir / PROGRESS)
        except OSError as err:  # a full disk must not stop the sweep; the line still shows
            log.warning("could not write %s: %s", self.dir / PROGRESS, err)


def _succeeded(job: Any) -> bool:
    """A done submitit task returned a result that is not a failed Hydra job (hydra-submitit runs
    the job with Hydra's run_job, which catches the task's exception into a FAILED JobReturn); a
    task that left no result (killed, timed out) failed."""
    try:
        result = job.results()[0]
    except Exception:  # noqa: BLE001 - no readable result is a failure
        return False
    status = getattr(result, "status", None)
    return getattr(status, "name", "COMPLETED") != "FAILED"


def watch_array(jobs: list[Any], nums: list[int], progress: SweepProgress, poll_s: float = 2.0) -> None:
    """Report the starts and ends of submitit jobs (an array) until all are done: submitit's
    `state` says RUNNING once a task started, `done()` when it ended."""
    waiting = dict(zip(nums, jobs, strict=True))
    running: set[int] = set()
    while waiting:
        for num, job in list(waiting.items()):
            if job.done():
                if num not in running:
                    progress.started(num)
                progress.ended(num, ok=_succeeded(job))
                del waiting[num]
                running.discard(num)
            elif num not in running and job.state == "RUNNING":
                progress.started(num)
                running.add(num)
        if waiting:
            time.sleep(poll_s)
    progress.close()
