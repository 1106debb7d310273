"""A slot's worker process: `python -m gptlab.launcher.worker`, one job after another from stdin.

Each line on stdin names a job file that the launcher pickled (cloudpickle, as hydra-submitit-launcher
does): the job's composed config (its ${now} already resolved, so every job agrees on the sweep's
directory and wandb group), the Hydra context and the task function. The job runs exactly as Hydra's
basic launcher runs it in-process, and its outcome is pickled next to the job file. One process per
slot, not per job: torch and Lightning are imported once, as in a serial sweep, so a slot costs no
more start-up than one serial job. A job ended by SIGTERM (preemption) raises SystemExit in the task,
which ends this worker with that exit code and no outcome: the launcher reads the code.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import cloudpickle

DONE, FAILED = "completed", "failed"


def outcome_path(job_file: Path) -> Path:
    return job_file.with_suffix(".outcome")


def _portable(err: BaseException) -> BaseException:
    """The exception itself if it survives pickling, else a RuntimeError carrying its text."""
    try:
        cloudpickle.dumps(err)
        return err
    except Exception:  # noqa: BLE001 - any unpicklable exception is described instead
        return RuntimeError(f"{type(err).__name__}: {err}")


def job_log(config: Any) -> Path | None:
    """<job dir>/output.log: where a job that runs beside others writes its terminal output."""
    try:
        return Path(str(config.hydra.sweep.dir)) / str(config.hydra.sweep.subdir) / "output.log"
    except Exception:  # noqa: BLE001 - a config without Hydra's keys keeps the terminal
        return None


@contextmanager
def output_to(path: Path | None) -> Iterator[None]:
    """Send this process's stdout and stderr (file descriptors 1 and 2, so the progress bar and
    child processes too) to `path` for the job's duration: jobs side by side do not interleave
    their output on the terminal, where the sweep's status lines go."""
    if path is None:
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    with open(path, "a") as out:
        os.dup2(out.fileno(), 1)
        os.dup2(out.fileno(), 2)
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)


def run_one(job_file: Path) -> None:
    from hydra.core.singleton import Singleton
    from hydra.core.utils import JobStatus, run_job, setup_globals

    payload: dict[str, Any] = cloudpickle.loads(job_file.read_bytes())
    Singleton.set_state(payload["singletons"])
    setup_globals()
    with output_to(job_log(payload["config"])):
        ret = run_job(
            hydra_context=payload["hydra_context"],
            task_function=payload["task_function"],
            config=payload["config"],
            job_dir_key="hydra.sweep.dir",
            job_subdir_key="hydra.sweep.subdir",
        )
    ok = ret.status == JobStatus.COMPLETED
    outcome: dict[str, Any] = {"status": DONE if ok else FAILED, "value": ret._return_value if ok else None}
    if not ok:
        outcome["error"] = _portable(ret._return_value)
    target = outcome_path(job_file)
    tmp = target.with_suffix(".tmp")
    tmp.write_bytes(cloudpickle.dumps(outcome))
    tmp.replace(target)


def main() -> int:
    # Import what every gptlab job needs (torch, Lightning: ~6 s) before the first job arrives, while
    # the sweep process is still pickling jobs; a job of another app pays only for this.
    preload = os.environ.get("GPTLAB_PRELOAD", "")
    if preload:
        try:
            importlib.import_module(preload)
        except ImportError:
            pass  # the job imports what it needs itself
    for line in sys.stdin:
        if line.strip():
            run_one(Path(line.strip()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
