"""experiment=ladder_ffn_quick end to end: the real sweeper and slots launcher run 3 rungs × 2 arms ×
2 LRs side by side (1 seed of the preset's 2: nothing here reads a second); every job trains the
rung's model at the rung's LR (read back from the job's own resolved config), the sweep's report has
the ladder's per-rung table and fit, and a re-run skips the finished jobs and re-runs a missing one as
itself."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from gptlab.analysis.report import parse_table
from tests.cli_here import train_py_run_here
from tests.conftest import run_script

pytestmark = [pytest.mark.slow, pytest.mark.multiproc]


def test_quick_ladder_runs_through_the_slots_launcher_and_reports_a_fit(tmp_path: Path) -> None:
    sweep = tmp_path / "ladder"
    args = ["-m", "experiment=ladder_ffn_quick", f"hydra.sweep.dir={sweep}", "logger=csv",
            "hydra.launcher.slots=2", "hydra.launcher.threads=1", "hydra.sweeper.seeds=1",
            "callbacks.tasks.names=[]"]  # fmt: skip
    proc = run_script("train.py", *args, env={"OMP_NUM_THREADS": "1"}, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    record = json.loads((sweep / "ablation.json").read_text())
    assert len(record["jobs"]) == 3 * 2 * 2 * 1 and record["ladder_key"] == "model.n_embd"
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

    # the same command again, job 5's result removed: the 11 finished jobs are skipped untouched and
    # job 5 runs again in its own numbered dir, as itself (the numbering does not move). One job left
    # takes one slot, which runs it in the sweep's own process: here, in this one (tests/cli_here.py)
    mtimes = {k: (sweep / str(k) / "metrics.json").stat().st_mtime_ns for k in range(12) if k != 5}
    overrides = (sweep / "5" / ".hydra" / "overrides.yaml").read_text()
    (sweep / "5" / "metrics.json").unlink()
    again = train_py_run_here(*args, env={"OMP_NUM_THREADS": "1"})
    assert again.returncode == 0, again.stderr[-3000:]
    assert {k: (sweep / str(k) / "metrics.json").stat().st_mtime_ns for k in mtimes} == mtimes
    assert json.loads((sweep / "5" / "metrics.json").read_text())["status"] == "finished"
    assert (
        yaml.safe_load((sweep / "5" / ".hydra" / "overrides.yaml").read_text())[:7]
        == yaml.safe_load(overrides)[:7]
    )


@pytest.mark.parametrize(
    ("preset", "par", "base_depth"),
    [("ladder_ffn_mup", "mup", None), ("ladder_ffn_completep", "completep", 1)],
)
def test_the_mup_ladder_runs_shrunk_with_one_lr_grid_and_fixed_width_heads(
    tmp_path: Path, preset: str, par: str, base_depth: int | None
) -> None:
    """experiment=ladder_ffn_mup (and its CompleteP sibling) as documented, shrunk to the quick
    preset's sizes (2 rungs, 1 arm, 1 seed, 2 LRs, 6 steps) and one slot (the 4 jobs in the sweep's
    own process, here this test's: tests/cli_here.py; the test above runs the slots launcher side by
    side as a real subprocess): every job is μP on the d = 24
    base with heads of 24 (CompleteP: and the L = 1 base depth), every rung has the same LR grid (the
    model scales the hidden LRs itself), and every job finishes."""
    sweep = tmp_path / "mup"
    shrink = ["model.block_size=32", "data.batch_size=4", "data.max_bytes=300000", "data.val_windows=8",
              "optim.warmup_steps=2", "trainer.val_check_interval=6", "hydra.sweeper.seeds=1",
              "hydra.sweeper.ladder.widths=[24,48]", "hydra.sweeper.ladder.tokens=768",
              "hydra.sweeper.lr={min:0.01,max:0.02,points:2}", "hydra.sweeper.arms=[gelu]",
              "callbacks.tasks.names=[]"]  # fmt: skip
    args = ["-m", f"experiment={preset}", "hydra.launcher.slots=1", "hydra.launcher.threads=1",
            f"hydra.sweep.dir={sweep}", "logger=csv", *shrink]  # fmt: skip
    proc = train_py_run_here(*args, env={"OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    record = json.loads((sweep / "ablation.json").read_text())
    assert record["rung_lrs"] == {"24": ["0.01", "0.02"], "48": ["0.01", "0.02"]}
    assert len(record["jobs"]) == 2 * 1 * 2
    for k, _ in enumerate(record["jobs"]):
        cfg = yaml.safe_load((sweep / str(k) / ".hydra" / "config.yaml").read_text())["model"]
        assert (cfg["parametrization"], cfg["mup_base_width"], cfg["mup_base_head_dim"]) == (par, 24, 24)
        assert cfg["mup_base_depth"] == base_depth
        assert cfg["n_embd"] // cfg["n_head"] == 24
        assert json.loads((sweep / str(k) / "metrics.json").read_text())["status"] == "finished"
