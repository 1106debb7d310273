"""SIGTERM during training: last.ckpt is written, the process exits 143 in time, resume continues."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from gptlab.training.callbacks.preemption import EXIT_PREEMPTED
from tests.training.rel_harness import REPO, TINY, series, train_here
from tests.waiting import SUITE_LIMIT_S, ended, wait_until

# no validation and no regular checkpoint before the signal: last.ckpt can only come from preemption
LONG = ["trainer.max_steps=100000", "trainer.val_check_interval=100000"]


def _logged_steps(csv_file: Path) -> int:
    if not csv_file.exists():
        return 0
    return sum(1 for line in csv_file.read_text().splitlines()[1:] if line.strip())


@pytest.mark.slow
def test_sigterm_saves_last_ckpt_exits_and_resumes(tmp_path: Path, cache: Path) -> None:
    run = tmp_path / "run"
    env = {**os.environ, "WANDB_MODE": "disabled"}
    env.pop("LOCAL_RANK", None)
    proc = subprocess.Popen(
        [
            sys.executable,
            str(REPO / "train.py"),
            *TINY,
            *LONG,
            f"data.cache_dir={cache}",
            f"hydra.run.dir={run}",
        ],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        # a few steps done (the CSV flushes them)
        wait_until(
            lambda: _logged_steps(run / "csv" / "metrics.csv") >= 6, "6 logged steps", gone=ended(proc)
        )
        # while it trains, the run's record says so: a run killed outright is never read as finished
        assert json.loads((run / "metrics.json").read_text()) == {"status": "running"}
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=SUITE_LIMIT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == EXIT_PREEMPTED, out[-3000:]
    assert "preempted (SIGTERM) after" in out and "Traceback" not in out
    status = json.loads((run / "metrics.json").read_text())
    assert status["status"] == "preempted" and status["resume_from"].endswith("last.ckpt")
    ckpt = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)
    saved = ckpt["global_step"]
    assert saved >= 1 and status["steps"] == saved

    resumed = tmp_path / "resumed"
    result = train_here(
        resumed,
        cache,
        f"trainer.max_steps={saved + 2}",
        "trainer.val_check_interval=100000",
        f"ckpt_path={run / 'checkpoints' / 'last.ckpt'}",
    )
    assert sorted(series(resumed, "train/loss")) == [saved, saved + 1]  # continues, not from 0
    assert result["steps"] == saved + 2
