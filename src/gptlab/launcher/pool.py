"""Run pickled jobs on a node's slots: one worker process per slot, each with its slot's environment.

A slot's worker (gptlab.launcher.worker) takes its jobs one after another, the next as soon as it is
free, so the jobs start in grid order. Each worker is a process group of its own (with the DDP ranks
its job starts), so that
- Ctrl-C or SIGTERM to the sweep reaches every running job as SIGTERM, which Lightning turns into a
  preemption checkpoint (checkpoints/last.ckpt) and exit code 143; after `stop_timeout_s` what is
  still running is killed; no new job starts, and the sweep exits 143 (130 for Ctrl-C);
- a job that crashes is a failed outcome and the others go on; a worker that dies (a segfault, an
  OOM kill) fails its job only, and the slot gets a new worker;
- a sweep process killed outright (SIGKILL) still stops its jobs: on Linux each worker asks the
  kernel for SIGTERM when its parent dies (PR_SET_PDEATHSIG), so no job trains on as an orphan.
"""

from __future__ import annotations

import ctypes
import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cloudpickle

from gptlab.launcher.slots import Slot, slot_env
from gptlab.launcher.worker import outcome_path

log = logging.getLogger(__name__)
PR_SET_PDEATHSIG = 1


@dataclass
class Task:
    num: int  # the job's number (its directory under the sweep dir)
    payload: dict[str, Any]  # what gptlab.launcher.worker.run_one needs


@dataclass
class Outcome:
    num: int
    status: str  # "completed" | "failed"
    value: Any = None
    error: BaseException | None = None
    exit_code: int | None = None


@dataclass
class _Worker:
    slot: Slot
    proc: subprocess.Popen
    task: Task | None = None


class SweepStopped(SystemExit):
    """The sweep got SIGINT/SIGTERM: every running job was asked to checkpoint and stop."""


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except OSError:
        pass  # not Linux: the signal forwarding still covers Ctrl-C and SIGTERM


def _kill_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def entry_command() -> list[str]:
    """How this sweep was started (train.py or `-m module`): a job's DDP ranks start the same way,
    not as the worker module the job happens to run in."""
    import __main__

    spec = getattr(__main__, "__spec__", None)
    if spec is None:
        return [sys.executable, os.path.abspath(sys.argv[0])]
    return [sys.executable, "-m", spec.name]


def _start_worker(slot: Slot, entry: list[str], preload: str) -> _Worker:
    env = {**os.environ, **slot_env(slot), "GPTLAB_ENTRY": json.dumps(entry), "GPTLAB_PRELOAD": preload}
    proc = subprocess.Popen(
        [sys.executable, "-m", "gptlab.launcher.worker"],
        env=env,
        stdin=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own group: Ctrl-C reaches it only through the sweep
        preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
    )
    return _Worker(slot, proc)


def run_in_slots(
    tasks: list[Task],
    slots: list[Slot],
    scratch: Path,
    stop_timeout_s: float = 120.0,
    poll_s: float = 0.1,
    on_start: Callable[[Task, Slot], None] | None = None,
    preload: str = "",
    on_end: Callable[[Outcome], None] | None = None,
) -> list[Outcome]:
    """Every task run once, started in list order as slots free up; outcomes in the tasks' order."""
    scratch.mkdir(mode=0o700, parents=True, exist_ok=True)  # job files: this user's processes only
    entry = entry_command()
    queue = list(tasks)
    workers: dict[int, _Worker] = {}
    outcomes: dict[int, Outcome] = {}
    stop: list[int] = []

    def on_signal(signum: int, _frame: Any) -> None:
        if not stop:
            busy = sum(w.task is not None for w in workers.values())
            log.warning(
                "sweep got %s: asking %d running job(s) to save a checkpoint and stop",
                signal.Signals(signum).name,
                busy,
            )
        stop.append(signum)
        for w in workers.values():
            _kill_group(w.proc, signal.SIGTERM)

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        while queue or any(w.task is not None for w in workers.values()):
            for slot in slots:
                if stop or not queue:
                    break
                w = workers.get(slot.index)
                if w is not None and w.task is not None:
                    continue
                if w is None or w.proc.poll() is not None:
                    w = workers[slot.index] = _start_worker(slot, entry, preload)
                    if stop:  # the signal came while it was starting
                        _kill_group(w.proc, signal.SIGTERM)
                        break
                w.task = queue.pop(0)
                job_file = scratch / f"{w.task.num}.job"
                outcome_path(job_file).unlink(missing_ok=True)
                job_file.write_bytes(cloudpickle.dumps(w.task.payload))
                assert w.proc.stdin is not None
                w.proc.stdin.write(f"{job_file}\n")
                w.proc.stdin.flush()
                if on_start:
                    on_start(w.task, slot)
            if stop:
                queue.clear()
            time.sleep(poll_s)
            _collect(workers, outcomes, scratch, on_end)
            if stop:
                _wait_then_kill(workers, outcomes, scratch, stop_timeout_s, poll_s, on_end)
    finally:
        for w in workers.values():  # end of stdin: an idle worker exits
            if w.proc.poll() is None and w.proc.stdin is not None:
                try:
                    w.proc.stdin.close()
                except OSError:
                    pass
        for w in workers.values():
            try:
                w.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                _kill_group(w.proc, signal.SIGKILL)
                w.proc.wait()
        for s, handler in previous.items():
            signal.signal(s, handler)
    if stop:
        raise SweepStopped(130 if stop[0] == signal.SIGINT else 143)
    return [outcomes[t.num] for t in tasks]


def _collect(
    workers: dict[int, _Worker],
    outcomes: dict[int, Outcome],
    scratch: Path,
    on_end: Callable[[Outcome], None] | None = None,
) -> None:
    """Record the outcome of every job that finished, or whose worker died under it."""
    for w in workers.values():
        if w.task is None:
            continue
        job_file = scratch / f"{w.task.num}.job"
        done = outcome_path(job_file)
        code = w.proc.poll()
        if done.exists() or code is not None:
            out = outcomes[w.task.num] = _read_outcome(w.task.num, job_file, code)
            w.task = None
            if on_end:
                on_end(out)


def _wait_then_kill(
    workers: dict[int, _Worker],
    outcomes: dict[int, Outcome],
    scratch: Path,
    timeout_s: float,
    poll_s: float,
    on_end: Callable[[Outcome], None] | None = None,
) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and any(w.proc.poll() is None for w in workers.values()):
        time.sleep(poll_s)
        _collect(workers, outcomes, scratch, on_end)
    for w in workers.values():
        if w.proc.poll() is None:
            if w.task is not None:
                log.error("job %d did not stop within %.0f s of SIGTERM: killed", w.task.num, timeout_s)
            _kill_group(w.proc, signal.SIGKILL)
            w.proc.wait()
    _collect(workers, outcomes, scratch, on_end)


def _read_outcome(num: int, job_file: Path, code: int | None) -> Outcome:
    path = outcome_path(job_file)
    try:
        data = cloudpickle.loads(path.read_bytes())
    except (OSError, EOFError, ValueError, ModuleNotFoundError, AttributeError):
        reason = "preempted (SIGTERM)" if code in (143, -signal.SIGTERM) else "its worker died"
        err = RuntimeError(f"job {num} ended without a result (exit code {code}): {reason}")
        job_file.unlink(missing_ok=True)
        return Outcome(num, "failed", error=err, exit_code=code)
    path.unlink(missing_ok=True)
    job_file.unlink(missing_ok=True)
    return Outcome(num, data["status"], data.get("value"), data.get("error"), exit_code=code)
