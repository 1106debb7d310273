"""Running a documented command as a shell would, with shrink overrides appended, and reading
what it left behind; `in_parallel` is the pool each test module builds its runs with."""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import shlex
import subprocess
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import torch

from tests.docs.commands.parse import REPO
from tests.docs.commands.table import COMMANDS

WIDTH = 2  # commands at a time (the suite runs on 2 cores)
TIMEOUT = 600


@dataclass
class Ran:
    """A finished command: what ran, where, exit code, stdout, stderr."""

    argv: list[str]
    cwd: Path
    returncode: int
    stdout: str
    stderr: str

    def ok(self) -> Ran:
        assert self.returncode == 0, f"{shlex.join(self.argv)}\n(cwd {self.cwd})\n{self.stderr[-4000:]}"
        return self


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "TORCHELASTIC_", "PYTEST_"))}
    for key in ("LOCAL_RANK", "RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(key, None)
    env.update({"WANDB_MODE": "offline", "WANDB_SILENT": "true", "OMP_NUM_THREADS": "1", **(extra or {})})
    return env


def argv_of(doc: str, subs: dict[str, str] | None = None) -> tuple[list[str], dict[str, str]]:
    """A documented command as a shell would run it: placeholders replaced, split with shlex,
    leading VAR=value into the environment, `python` -> this interpreter, repo scripts by path."""
    for old, new in (subs or {}).items():
        doc = doc.replace(old, new)
    words = shlex.split(doc)
    env: dict[str, str] = {}
    while "=" in words[0] and not words[0].startswith("-"):
        key, _, value = words.pop(0).partition("=")
        env[key] = value
    if words[0] in ("python", "python3", ".venv/bin/python"):
        words[0] = sys.executable
        if len(words) > 1 and words[1].endswith(".py"):
            words[1] = str(REPO / words[1])
    elif words[0].startswith("scripts/"):
        words[0:1] = [sys.executable, str(REPO / words[0])]
    env.pop("PYTHONPATH", None)  # `PYTHONPATH=src`: the editable install already provides it
    if words[1:2] == ["-m"] and words[2].startswith("dev."):  # the team's tools: run from the repository
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    return words, env


def run_doc(
    doc: str, *extra: str, cwd: Path, subs: dict[str, str] | None = None, stdin: str | None = None
) -> Ran:
    """Run one documented command (its COMMANDS key) with `extra` arguments appended."""
    assert doc in COMMANDS, doc
    argv, env = argv_of(doc, subs)
    return run_argv([*argv, *extra], cwd=cwd, env=env, stdin=stdin)


def run_argv(argv: list[str], cwd: Path, env: dict[str, str] | None = None, stdin: str | None = None) -> Ran:
    cwd.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        argv, cwd=cwd, env=_env(env), input=stdin, capture_output=True, text=True, timeout=TIMEOUT
    )
    return Ran(argv, cwd, proc.returncode, proc.stdout, proc.stderr)


def make(target: str, *assignments: str) -> list[str]:
    """`make <target> VAR=...` in the repo with this interpreter's bin/ as the Makefile's BIN; the
    install step is taken as done (-o), so the target's own recipe runs."""
    bindir = Path(sys.executable).parent
    return [
        "make",
        "-s",
        "-C",
        str(REPO),
        f"BIN={bindir}",
        "-o",
        f"{bindir}/.installed",
        target,
        *assignments,
    ]


def in_parallel(jobs: dict[str, Callable[[], object]]) -> dict[str, object]:
    """Run the callables WIDTH at a time; an exception is kept as the result (its test fails)."""

    def guarded(fn: Callable[[], object]) -> object:
        try:
            return fn()
        except Exception as err:  # noqa: BLE001 - reported by the test that reads it
            return err

    with ThreadPoolExecutor(max_workers=WIDTH) as pool:
        futures = {name: pool.submit(guarded, fn) for name, fn in jobs.items()}
        return {name: f.result() for name, f in futures.items()}


def in_order(jobs: dict[str, Callable[[], object]]) -> dict[str, object]:
    """`in_parallel`'s results for callables that must run one at a time (in this process): each in
    turn, an exception kept as its result."""
    results: dict[str, object] = {}
    for name, fn in jobs.items():
        try:
            results[name] = fn()
        except Exception as err:  # noqa: BLE001 - reported by the test that reads it
            results[name] = err
    return results


def result(results: dict[str, object], name: str):
    got = results[name]
    if isinstance(got, BaseException):
        raise got
    return got


def summary(run_dir: Path) -> dict:
    return json.loads((run_dir / "metrics.json").read_text())


def finished(run_dir: Path) -> dict:
    s = summary(run_dir)
    assert s["status"] == "finished", s
    return s


def finite(x: object) -> bool:
    return isinstance(x, int | float) and math.isfinite(x)


def jobs_of(sweep: Path) -> list[Path]:
    return sorted((d for d in sweep.iterdir() if d.name.isdigit()), key=lambda d: int(d.name))


def the_only(pattern: str, root: Path) -> Path:
    found = sorted(root.glob(pattern))
    assert len(found) == 1, (pattern, found)
    return found[0]


# Shrinking overrides: a couple of steps of a small stream, a short sample, no progress bar.
STEPS = ["trainer.max_steps=2", "trainer.val_check_interval=2", "trainer.enable_progress_bar=false"]
SMALL = [*STEPS, "data.max_bytes=200000", "data.val_windows=4", "sample.max_new_tokens=4"]
# wandb off (the CSV log only) where a test reads nothing of wandb: its offline run costs a few CPU
# seconds per job, and what it logs is read by the tests that check it (tests/distributed/test_multirun.py,
# tests/dashboards, tests/ablation/test_sweep_resume.py); `make train` keeps the default loggers here.
CSV = "logger=csv"
GRID = ["seed=1", "trainer.log_every_n_steps=1", "data.batch_size=4"]  # one seed; the LR comes per preset
# The in-loop task (val_continuation, scored at each run's end) where no test of these pools reads a
# task number: ~2 CPU s a job, the largest cost of a 2-step job (the task's own tests: tests/tasks,
# tests/training/test_tasks_callback.py; its report section: tests/analysis/test_task_report.py).
NO_TASKS = "callbacks.tasks.names=[]"
# what a sweep job of a pool needs: 2 steps of a small stream, no sample (the presets' own 0), no task
SWEEP_SMALL = [*STEPS, "data.max_bytes=200000", "data.val_windows=4", NO_TASKS]


def sweep_args(cache: Path) -> list[str]:
    """What every shrunk sweep appends: SWEEP_SMALL, one seed, one LR, the session's token cache."""
    return [*SWEEP_SMALL, *GRID, "optim.lr=0.003", f"data.cache_dir={cache}"]


def sweep_finished(sweep: Path, n_jobs: int) -> list[dict]:
    jobs = jobs_of(sweep)
    assert len(jobs) == n_jobs, jobs
    runs = [finished(j) for j in jobs]
    assert all(finite(r.get("final_val_loss", r.get("val_loss"))) for r in runs), runs
    return runs


_IN_PROCESS = threading.Lock()  # stdout, the working directory and Hydra's state are the process's


def run_doc_here(
    doc: str, main: Callable[[list[str]], int], *extra: str, cwd: Path, subs: dict[str, str] | None = None
) -> Ran:
    """A documented command that builds no training process (a report, a table, an export), run by
    calling its script's own `main` in this process from `cwd`, its output captured as `run_doc`'s:
    the ~8 CPU s of a fresh interpreter saved (lead's rule, round 8). Each such script keeps a real
    subprocess run elsewhere in the suite, so its command line and exit code stay tested."""
    assert doc in COMMANDS, doc
    argv, env = argv_of(doc, subs)
    assert not env, (doc, env)  # an environment the command sets: run it with run_doc
    args = [*(argv[3:] if argv[1] == "-m" else argv[2:]), *map(str, extra)]
    cwd.mkdir(parents=True, exist_ok=True)
    out, err = io.StringIO(), io.StringIO()
    with _IN_PROCESS, contextlib.chdir(cwd), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        threads = torch.get_num_threads()  # bench.threads sets it for the process
        try:
            code = main(args)
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else 1
        finally:
            torch.set_num_threads(threads)
    return Ran([*argv, *extra], cwd, code, out.getvalue(), err.getvalue())


def run_train_doc_here(doc: str, *extra: str, cwd: Path, subs: dict[str, str] | None = None) -> Ran:
    """A documented `python train.py ...` whose jobs run in train.py's own process (a single run, or
    a multirun on one slot: Hydra's basic launcher path), run to its end in this process from `cwd`
    (tests/cli_here.py `train_py_run_here`, which refuses a sweep that would start processes), its
    output captured as `run_doc`'s: the ~8 CPU s of a fresh interpreter saved. train.py, its multirun
    and each launcher keep real subprocess runs in the suite (docs/development.md)."""
    assert doc in COMMANDS, doc
    argv, env = argv_of(doc, subs)
    assert argv[1] == str(REPO / "train.py"), (doc, argv)
    return train_argv_here([*argv[2:], *map(str, extra)], cwd, env)


def train_argv_here(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> Ran:
    """`python train.py <args>` from `cwd` in this process (as `run_train_doc_here`), one at a time."""
    from tests.cli_here import train_py_run_here

    cwd.mkdir(parents=True, exist_ok=True)
    with _IN_PROCESS:
        proc = train_py_run_here(*args, cwd=cwd, env={"OMP_NUM_THREADS": "1", **(env or {})})
    argv = [sys.executable, str(REPO / "train.py"), *args]
    return Ran(argv, cwd, proc.returncode, proc.stdout, proc.stderr)
