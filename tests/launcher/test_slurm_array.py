"""`hydra/launcher=slurm` through a fake SLURM (tests/launcher/fake_slurm.py: sbatch, srun, sacct,
squeue, scancel and scontrol on PATH, the array's tasks run here with SLURM's variables).

What the README's command does on a cluster, checked where it can fail: the sbatch script submitted
(one array, the partition, --requeue, GPUs only for GPU jobs, no --wckey unless set), the same final
losses as the serial sweep (Hydra's basic launcher in one process: the oracle), a task killed
outright counted as failed with its signal, and a task sent USR2 (SLURM's warning before the time
limit, or a preemption) saving last.ckpt at a step boundary, requeued, and resumed from it.
"""

from __future__ import annotations

import csv
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.conftest import REPO
from tests.launcher.fake_slurm import install
from tests.waiting import SUITE_LIMIT_S, ended, wait_until

pytest.importorskip("hydra_plugins.hydra_submitit_launcher")

QUICK = [
    "experiment=ablate_tying_quick",
    "hydra/launcher=slurm",
    "hydra.launcher.partition=gpu",
    "logger=csv",
]
ONE_LR = ["hydra.sweeper.seeds=1", "hydra.sweeper.lr.points=1", "hydra.sweeper.lr.max=1.0e-3"]
# for the sweeps whose report and task scores no test reads: neither is made
UNREAD = ["hydra.sweeper.report=false", "callbacks.tasks.names=[]"]


def login_node(root: Path) -> dict[str, str]:
    """The environment of a login node of a fake cluster whose state lives under `root`."""
    bin_dir = install(root / "slurm-bin")
    return {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "FAKE_SLURM_DIR": str(root / "slurm-state"),
        "OMP_NUM_THREADS": "1",
        "WANDB_MODE": "offline",
        "WANDB_SILENT": "true",
    }


@pytest.fixture
def cluster(tmp_path: Path) -> dict[str, str]:
    """The environment of a login node of the fake cluster."""
    return login_node(tmp_path)


def sweep_command(out: Path, cache: Path, *args: str) -> list[str]:
    return [
        sys.executable,
        "train.py",
        "-m",
        *QUICK,
        f"hydra.sweep.dir={out}",
        f"data.cache_dir={cache}",
        *args,
    ]


def submitted(env: dict[str, str]) -> list[str]:
    return sorted((Path(env["FAKE_SLURM_DIR"]) / "sbatch").glob("*.sh"))


def sbatch_lines(script: Path) -> set[str]:
    return {line for line in script.read_text().splitlines() if line.startswith("#SBATCH")}


def task(env: dict[str, str], key: str) -> dict:
    return json.loads((Path(env["FAKE_SLURM_DIR"]) / "tasks" / f"{key}.json").read_text())


def losses(sweep: Path) -> dict[str, float]:
    return {
        d.name: json.loads((d / "metrics.json").read_text())["final_val_loss"]
        for d in sweep.iterdir()
        if d.name.isdigit()
    }


@pytest.mark.slow
def test_the_readme_command_submits_one_array_with_the_serial_losses(
    quick_tying_sweep: Path, tmp_path: Path, cluster: dict[str, str]
) -> None:
    """The grid's seed-1, LR-1e-3 corner (both arms) as one array of 2 on a CPU job: the same final
    losses job for job as the serial sweep's jobs 0 and 2 (seed 1, LR 1e-3, untied and tied), the
    report written; the script asks what a CPU array needs."""
    out, cache = tmp_path / "sweep", quick_tying_sweep.parent.parent / "token-cache"
    # docs/slurm.md's command, with one seed and one LR (and this test's directories)
    cmd = sweep_command(out, cache, "hydra.launcher.partition=cpu", "trainer.accelerator=cpu", *ONE_LR)
    proc = subprocess.run(cmd, cwd=REPO, env=cluster, capture_output=True, text=True, timeout=SUITE_LIMIT_S)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (script,) = submitted(cluster)
    lines = sbatch_lines(script)
    assert {"#SBATCH --array=0-1%2", "#SBATCH --partition=cpu", "#SBATCH --requeue"} <= lines
    assert "#SBATCH --signal=USR2@120" in lines and "#SBATCH --ntasks-per-node=1" in lines
    assert not any("--gpus-per-node" in line or "--wckey" in line for line in lines), lines
    serial = losses(quick_tying_sweep)
    assert losses(out) == {"0": serial["0"], "1": serial["2"]}
    assert (out / "report.md").is_file()


def test_a_gpu_array_asks_for_its_gpus_and_a_task_that_fails_fails_the_sweep(
    tmp_path: Path, cluster: dict[str, str]
) -> None:
    """trainer.accelerator=gpu trainer.devices=2 with a workload key: the script asks 2 GPUs and 2
    tasks per node and writes the key. This machine has no GPU, so every task fails: the sweep
    says which and exits 2."""
    out = tmp_path / "sweep"
    cmd = sweep_command(
        out, tmp_path / "cache", "hydra.launcher.partition=gpu", *ONE_LR, *UNREAD, "trainer.accelerator=gpu",
        "trainer.devices=2", "hydra.launcher.wckey=ablations",
    )  # fmt: skip
    proc = subprocess.run(cmd, cwd=REPO, env=cluster, capture_output=True, text=True, timeout=SUITE_LIMIT_S)
    (script,) = submitted(cluster)
    lines = sbatch_lines(script)
    assert {"#SBATCH --gpus-per-node=2", "#SBATCH --ntasks-per-node=2", "#SBATCH --wckey=ablations"} <= lines
    assert {"#SBATCH --array=0-1%2", "#SBATCH --partition=gpu"} <= lines
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "2 job(s) of the sweep failed" in proc.stderr
    for k in ("0", "1"):
        assert json.loads((out / k / "metrics.json").read_text())["status"] == "failed"


def running_step_pid(env: dict[str, str], key: str) -> int | None:
    try:
        t = task(env, key)
    except (OSError, ValueError):
        return None
    pids = t.get("step_pids") or []
    return pids[0] if t.get("state") == "RUNNING" and pids else None


@contextmanager
def running_task(
    cmd: list[str], env: dict[str, str], job_dir: Path, key: str
) -> Iterator[tuple[subprocess.Popen, int]]:
    """The sweep started in the background, once the job's task trains here: (sweep, its step's pid).
    The sweep is killed on the way out if it is still running."""
    sweep = subprocess.Popen(
        cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        wait_until(
            lambda: job_status(job_dir) == "running" and running_step_pid(env, key),
            f"task {key} to train",
            gone=task_over(sweep, env, key),
        )
        yield sweep, running_step_pid(env, key)
    finally:
        if sweep.poll() is None:
            sweep.kill()


def task_over(sweep: subprocess.Popen, env: dict[str, str], key: str) -> Callable[[], str | None]:
    """Why a wait on task `key` can no longer succeed: the sweep exited, or the fake SLURM's job
    table says the task ended (a task that is pending or running may still get there)."""
    sweep_ended = ended(sweep)

    def check() -> str | None:
        try:
            state = task(env, key).get("state")
        except (OSError, ValueError):  # not submitted yet
            state = None
        if state in ("COMPLETED", "FAILED", "CANCELLED"):
            return f"the fake SLURM says task {key} is {state}"
        return sweep_ended()

    return check


def csv_rows(path: Path) -> int:
    """Training rows the run's CSV log holds so far (Lightning flushes it every 100 steps)."""
    try:
        with path.open(newline="") as f:
            return sum(1 for r in csv.DictReader(f) if r.get("train/loss"))
    except (OSError, csv.Error):
        return 0


def job_status(job_dir: Path) -> str | None:
    try:
        return json.loads((job_dir / "metrics.json").read_text()).get("status")
    except (OSError, ValueError):
        return None


def train_rows(path: Path) -> dict[int, str]:
    with path.open(newline="") as f:
        rows = [r for r in csv.DictReader(f) if r.get("train/loss")]
    steps = [int(r["step"]) for r in rows]
    assert len(steps) == len(set(steps)), f"a step logged twice in {path}"
    return {int(r["step"]): r["train/loss"] for r in rows}


STEPS = 400


@pytest.fixture(scope="module")
def signalled(tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    """One CPU array of 2 jobs (both arms, one LR, one seed; 400 steps, a CSV row a step) that the
    two signal tests share, each reading its own job: job 1's process is killed with SIGKILL as soon
    as it trains (what the OOM killer does); job 0 is sent USR2 (`scancel --signal=USR2`, what
    `--signal=USR2@120` sends before the time limit) once it has logged a step, until it is requeued.
    One sweep instead of one per signal: a sweep start and a task start fewer."""
    root = tmp_path_factory.mktemp("signals")
    env, out = login_node(root), root / "sweep"
    cmd = sweep_command(
        out, root / "cache", *ONE_LR, *UNREAD, f"trainer.max_steps={STEPS}", "trainer.log_every_n_steps=1",
        "trainer.val_check_interval=1000", "trainer.accelerator=cpu",
    )  # fmt: skip
    with running_task(cmd, env, out / "1", "4200_1") as (sweep, pid):
        os.kill(pid, signal.SIGKILL)
        # past step 0 (the CSV's first flush), so the checkpoint is mid-run: a USR2 taken at the first
        # step boundary saves step 0, and one before fit starts has nothing to save and is ignored
        log = out / "0" / "csv" / "metrics.csv"
        wait_until(
            lambda: csv_rows(log) > 0, "task 4200_0 to log a step", gone=task_over(sweep, env, "4200_0")
        )
        while task(env, "4200_0")["restarts"] == 0 and sweep.poll() is None:
            subprocess.run(["scancel", "--signal=USR2", "4200_0"], env=env, check=True)
            time.sleep(1.0)
        _, stderr = sweep.communicate(timeout=SUITE_LIMIT_S)
    # the sweep ends once it has read job 0's result pickle, which the task writes before its batch
    # script exits: the job table (like sacct) says COMPLETED a moment later
    wait_until(
        lambda: task(env, "4200_0")["state"] in ("COMPLETED", "FAILED", "CANCELLED"),
        "the job table to record task 4200_0's end",
        gone=lambda: None,
    )
    return SimpleNamespace(out=out, env=env, returncode=sweep.returncode, stderr=stderr)


@pytest.mark.slow
def test_a_task_killed_outright_counts_as_failed_with_its_signal(signalled: SimpleNamespace) -> None:
    """The OOM killer's SIGKILL to job 1's process: no metrics.json end, no result pickle. sacct says
    FAILED 0:9; the sweep records job 1 failed "killed by signal 9" and exits 2; job 0 finished."""
    out, stderr = signalled.out, signalled.stderr
    assert task(signalled.env, "4200_1")["exit_code"] == "0:9"
    assert signalled.returncode == 2, stderr[-3000:]
    failed = json.loads((out / "1" / "metrics.json").read_text())
    assert failed["status"] == "failed"
    assert failed["error"].startswith("killed by signal 9 (SIGKILL; sacct: FAILED 0:9)"), failed["error"]
    assert "1 job(s) of the sweep failed" in stderr and "killed by signal 9" in stderr.split("failed:")[-1]
    assert json.loads((out / "0" / "metrics.json").read_text())["status"] == "finished"


@pytest.mark.slow
def test_usr2_saves_last_ckpt_requeues_and_the_task_resumes(signalled: SimpleNamespace) -> None:
    """USR2 to a running task (`scancel --signal=USR2`, what `--signal=USR2@120` sends before the time
    limit): the run stops at a step boundary and saves last.ckpt, submitit requeues the task (scontrol
    requeue), and the second attempt resumes from that checkpoint to the end: the sweep counts it no
    failure (its one failed job is job 1, killed outright). metrics.csv holds every step once, the
    first attempt's rows unchanged (metrics.part-0.csv is that attempt's file)."""
    out, stderr, steps = signalled.out, signalled.stderr, STEPS
    assert signalled.returncode == 2 and "1 job(s) of the sweep failed" in stderr, stderr[-3000:]
    assert not re.search(r"^\s*0: ", stderr.split("failed:")[-1], re.M), stderr[-3000:]
    done = task(signalled.env, "4200_0")
    assert done["restarts"] >= 1 and done["state"] == "COMPLETED"
    job = out / "0"
    metrics = json.loads((job / "metrics.json").read_text())
    assert metrics["status"] == "finished" and metrics["steps"] == steps
    logs = "".join(p.read_text() for p in [*(out / ".submitit").glob("4200_0/*_log.*"), *job.glob("*.log")])
    saved_at = int(logs.split("preempted (SIGTERM) after ")[1].split()[0])
    assert 0 < saved_at < steps, saved_at
    assert "resuming from" in logs and "last.ckpt" in logs
    first, whole = train_rows(job / "csv" / "metrics.part-0.csv"), train_rows(job / "csv" / "metrics.csv")
    assert sorted(whole) == list(range(steps))
    assert max(first) >= saved_at - 1 and all(whole[s] == first[s] for s in first if s < saved_at)
