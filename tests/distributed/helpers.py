"""Helpers of the multi-process tests: the shared overrides, running train.py, reading metrics.csv.

All runs train the same tiny model on the same data for the same 10 steps and the same GLOBAL batch
of 4 windows: one process with data.batch_size=4, or two with 2 each (the DataModule gives rank r the
stream positions g % 2 == r, so both ranks together read what the single process reads).
"""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
STEPS = 10
GLOBAL_BATCH = 4
BLOCK = 64
GRAD_CLIP = 2.2  # between the smallest and largest total grad norm of these runs: some steps clip
TIMEOUT = 900
# callbacks.tasks in every run: 7 items, 2 choices each in rank 0's share (items 0-2: 3 batches of 2
# requests), 4 each in rank 1's (items 3-6: 8 batches): FSDP2 ranks must still run equal forwards
TASKS = REPO / "tests" / "distributed" / "tasks_tiny.jsonl"
TASK_BATCH = 2


def common(cache: Path) -> list[str]:
    """Overrides every run shares (model.n_layer, the batch and the devices come on top)."""
    return [
        "model.n_embd=64",
        "model.n_head=4",
        f"model.block_size={BLOCK}",
        "data.max_bytes=200000",
        f"data.cache_dir={cache}",
        f"trainer.max_steps={STEPS}",
        "trainer.val_check_interval=4",
        "data.val_windows=5",  # uneven over 2 ranks: one pads with a weight-0 window
        "trainer.log_every_n_steps=1",
        "trainer.enable_progress_bar=false",
        "sample.max_new_tokens=0",
        "callbacks.telemetry.figures=false",
        "callbacks.telemetry.attention_every=1",  # the attention family on every step compared
        f"optim.grad_clip={GRAD_CLIP}",
        # all 10 steps inside the warmup: the LR of a step does not depend on max_steps, so a run
        # stopped at step 4 and resumed to 10 follows the same schedule as the straight one
        "optim.warmup_steps=20",
        "seed=7",
        f"callbacks.tasks.names=[{TASKS}]",
        "callbacks.tasks.every_n_steps=null",  # at every validation
        f"callbacks.tasks.batch_size={TASK_BATCH}",
    ]


TWO_CPU = ["trainer.accelerator=cpu", "trainer.devices=2", f"data.batch_size={GLOBAL_BATCH // 2}"]


def env() -> dict[str, str]:
    """Offline wandb, one thread per process (2 processes on 2 cores; same kernels in every run)."""
    e = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "TORCHELASTIC_"))}
    for key in ("LOCAL_RANK", "RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "NODE_RANK"):
        e.pop(key, None)
    e.update(WANDB_MODE="offline", WANDB_SILENT="true", OMP_NUM_THREADS="1", HYDRA_FULL_ERROR="1")
    return e


@dataclass
class Run:
    """A finished command: its exit code, output, and the directory it ran in."""

    cmd: list[str]
    returncode: int
    output: str
    cwd: Path

    def check(self) -> Run:
        assert self.returncode == 0, f"{' '.join(self.cmd)}\n{self.output[-6000:]}"
        return self


def run(args: list[str], cwd: Path) -> Run:
    """Run a command from an empty working directory (to see anything it leaves there)."""
    cwd.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        args,
        cwd=cwd,
        env=env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=TIMEOUT,
    )
    return Run(args, proc.returncode, proc.stdout, cwd)


def spawned_dir(cache: Path, name: str) -> Path:
    """The run dir of the spawned two-rank run "<module>/<run>" (conftest.spawned_runs), beside the
    session's token cache: a job may resume from an earlier job's checkpoint there."""
    return cache.parent / "spawned" / name


def train_cmd(*overrides: str) -> list[str]:
    return [sys.executable, str(REPO / "train.py"), *overrides]


def read_metrics(run_dir: Path) -> dict[int, dict[str, float]]:
    """csv/metrics.csv as {step: {metric: value}}, the rows of one step merged."""
    rows: dict[int, dict[str, float]] = {}
    with open(run_dir / "csv" / "metrics.csv") as f:
        for row in csv.DictReader(f):
            step = int(row.pop("step"))
            rows.setdefault(step, {}).update({k: float(v) for k, v in row.items() if v != ""})
    return rows


def series(metrics: dict[int, dict[str, float]], name: str) -> dict[int, float]:
    return {s: m[name] for s, m in sorted(metrics.items()) if name in m}


def torchrun_job_dir(r: Run) -> Path:
    (sweep,) = list((r.cwd / "multirun").iterdir())
    return sweep / "0"
