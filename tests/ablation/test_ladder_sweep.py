"""experiment=ladder_ffn_quick end to end: the real sweeper and slots launcher run 3 rungs × 2 arms ×
2 LRs × 2 seeds side by side; every job trains the rung's model at the rung's LR (read back from
the job's own resolved config), the sweep's report has the ladder's per-rung table and fit, and a
re-run skips the finished jobs and re-runs a missing one as itself."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from gptlab.analysis.report import parse_table
from tests.conftest import run_script

pytestmark = [pytest.mark.slow, pytest.mark.multiproc]


def test_quick_ladder_runs_through_the_slots_launcher_and_reports_a_fit(tmp_path: Path) -> None:
    sweep = tmp_path / "ladder"
    args = ["-m", "experiment=ladder_ffn_quick", f"hydra.sweep.dir={sweep}", "logger=csv",
            "hydra.launcher.slots=2", "hydra.launcher.threads=1"]  # fmt: skip
    proc = run_script("train.py", *args, env={"OMP_NUM_THREADS": "1"}, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    record = json.loads((sweep / "ablation.json").read_text())
    assert len(record["jobs"]) == 3 * 2 * 2 * 2 and record["ladder_key"] == "model.n_embd"
    # the rule, written out: the reference grid at d=96 (3e-3, 1e-2) × 96/d, 3 digits
    for k, _ in enumerate(record["jobs"]):
        cfg = yaml.safe_load((sweep / str(k) / ".hydra" / "config.yaml").read_text())
        d = cfg["model"]["n_embd"]
        assert (cfg["model"]["n_layer"], cfg["model"]["n_head"], cfg["trainer"]["max_steps"]) == (
            d // 24,
            d // 24,
            6,
        )
        grid = [float(f"{lr * 96 / d:.3g}") for lr in (3e-3, 1e-2)]
        assert cfg["optim"]["lr"] in grid, (k, cfg["optim"]["lr"], grid)
        assert json.loads((sweep / str(k) / "metrics.json").read_text())["status"] == "finished"
    report = (sweep / "report.md").read_text()
    rungs = parse_table(report, "### Per rung")
    assert [r["rung"] for r in rungs] == ["model.n_embd=24", "model.n_embd=48", "model.n_embd=72"]
    sizes = [int(r["N"].replace(",", "")) for r in rungs]
    assert sizes == sorted(sizes) and len(set(sizes)) == 3
    fits = parse_table(report, "### Fitted curves")
    assert {(f["arm"], f["against"]) for f in fits} == {
        (a, c) for a in ("`gelu`", "`swiglu`") for c in ("N", "C")
    }
    assert (sweep / "figures" / "ladder_ffn_quick_loss_vs_n.png").is_file()

    # the same command again, job 5's result removed: the 23 finished jobs are skipped untouched and
    # job 5 runs again in its own numbered dir, as itself (the numbering does not move)
    mtimes = {k: (sweep / str(k) / "metrics.json").stat().st_mtime_ns for k in range(24) if k != 5}
    overrides = (sweep / "5" / ".hydra" / "overrides.yaml").read_text()
    (sweep / "5" / "metrics.json").unlink()
    again = run_script("train.py", *args, env={"OMP_NUM_THREADS": "1"}, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    assert {k: (sweep / str(k) / "metrics.json").stat().st_mtime_ns for k in mtimes} == mtimes
    assert json.loads((sweep / "5" / "metrics.json").read_text())["status"] == "finished"
    assert (
        yaml.safe_load((sweep / "5" / ".hydra" / "overrides.yaml").read_text())[:7]
        == yaml.safe_load(overrides)[:7]
    )
