"""dev/bench/sweep.py (docs/performance.md, "Sweeps side by side") runs end to end on a 2-job
grid: serial and 2 slots in one round, the final losses compared job for job, the JSON record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_script


@pytest.mark.slow
def test_bench_sweep_times_both_and_compares_losses(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    proc = run_script(
        "dev/bench/sweep.py", "--rounds", "1", "--no-warmup", "--work", str(tmp_path / "work"),
        "--json", str(out),
        "--set", "hydra.sweeper.seeds=1", "--set", "optim.lr=0.01", "--set", "trainer.max_steps=4",
        "--set", "logger=csv",  # the bench compares metrics.json's losses; no wandb run is read
        # nor a task score or a report: each job's in-loop task and each sweep's report.md left out
        "--set", "callbacks.tasks.names=[]", "--set", "hydra.sweeper.report=false",
        timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "final losses identical" in proc.stdout and "median ratio (slots / serial)" in proc.stdout
    (row,) = json.loads(out.read_text())["rounds"]
    assert row["jobs"] == 2 and row["differ"] == [] and row["serial_s"] > 0 and row["slots_s"] > 0
