"""LR transfer across a ladder (gptlab.analysis.ladder.lr_transfer, scripts/best_lr_vs_n.py) on hand-made
sweeps: one LR grid at every rung (lr_width_exponent 0) and each job's loss a bowl in log LR around an
optimum we place. The oracle is the placement: an optimum fixed in LR must read "holds" at its grid
point, one ∝ 1/width must drift by the grid steps its values span."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import yaml

from gptlab.ablation.grid import Ladder, build_grid, lr_values, seed_values
from gptlab.ablation.sweep_dir import write_record
from gptlab.analysis.ladder import analyse as ladder
from gptlab.analysis.ladder import lr_transfer
from gptlab.analysis.sweep.arms import arrange
from gptlab.analysis.sweep.jobs import read_sweep
from tests.conftest import run_script

WIDTHS = [24, 48, 96]
LRS = lr_values(1e-2, 1.6e-1, 5)  # 0.01, 0.02, 0.04, 0.08, 0.16: ×2 apart


def n_of(d: int) -> int:
    layers = d // 24
    return layers * 12 * d * d


def make_sweep(root: Path, optimum: Callable[[int], float], par: str = "mup") -> None:
    grid = build_grid(
        "model/ffn", ["gelu", "swiglu"], "gelu", LRS, seed_values(2), {}, [],
        ladder=Ladder(widths=WIDTHS, tokens=204_800, lr_width_exponent=0.0), tokens_per_step=1024,
    )  # fmt: skip
    write_record(root, grid, "g")
    record = json.loads((root / "ablation.json").read_text())  # the composed config says the parametrization
    record["configs"] = {"any": {"model": {"parametrization": par}}}
    (root / "ablation.json").write_text(json.dumps(record))
    rng = np.random.default_rng(0)
    for k, job in enumerate(grid.jobs()):
        v = dict(o.split("=", 1) for o in job)
        d, lr = int(v["model.n_embd"]), float(v["optim.lr"])
        loss = 3.0 - 0.1 * math.log(d) + 0.05 * math.log(lr / optimum(d)) ** 2 + rng.normal(0, 1e-4)
        path = root / str(k)
        (path / ".hydra").mkdir(parents=True)
        (path / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(job))
        model = {"n_embd": d, "n_layer": int(v["model.n_layer"]), "n_head": int(v["model.n_head"]),
                 "ffn": v["model/ffn"], "block_size": 64, "tie_embeddings": True}  # fmt: skip
        (path / ".hydra" / "config.yaml").write_text(yaml.safe_dump({"model": model}))
        metrics = {"status": "finished", "final_val_loss": loss, "vocab_size": 256, "tokens_seen": 204_800.0,
                   "steps": 200, "diverged": False, "num_params": n_of(d) + 256 * d}  # fmt: skip
        (path / "metrics.json").write_text(json.dumps(metrics))


def analyse(root: Path) -> list[lr_transfer.ArmTransfer]:
    record = json.loads((root / "ablation.json").read_text())
    return lr_transfer.transfer(ladder.analyse(arrange(read_sweep(root), record, "init"), record), record)


def test_an_optimum_fixed_in_lr_holds_at_its_grid_point(tmp_path: Path) -> None:
    make_sweep(tmp_path, lambda d: 0.04)
    for arm in analyse(tmp_path):
        assert arm.parametrization == "mup"
        assert [r.index for r in arm.rungs] == [2, 2, 2]
        assert arm.step == pytest.approx(2.0)
        assert arm.drift_steps == pytest.approx(0.0)
        assert arm.verdict == "holds"


def test_an_optimum_one_step_apart_still_holds_and_an_edge_is_named(tmp_path: Path) -> None:
    make_sweep(tmp_path, lambda d: {24: 0.16, 48: 0.16, 96: 0.08}[d])
    arm = analyse(tmp_path)[0]
    assert [r.index for r in arm.rungs] == [4, 4, 3]
    assert arm.drift_steps == pytest.approx(1.0)
    assert arm.verdict == "holds (on the grid's edge at 24, 48: the optimum may lie beyond)"


def test_an_optimum_falling_as_one_over_width_drifts(tmp_path: Path) -> None:
    make_sweep(tmp_path, lambda d: 0.16 * 24 / d, par="sp")  # 0.16, 0.08, 0.04: two steps down
    arm = analyse(tmp_path)[1]
    assert [r.index for r in arm.rungs] == [4, 3, 2]
    assert arm.drift_steps == pytest.approx(2.0)
    ns = [n_of(d) for d in WIDTHS]
    slope = np.polyfit(np.log(ns), np.log([0.16, 0.08, 0.04]), 1)[0]  # numpy on the placed values
    assert arm.slope == pytest.approx(slope, rel=1e-9)
    assert arm.verdict == f"drifts (2.0 grid steps, best LR ∝ N^{slope:.2f})"
    assert arm.parametrization == "sp"


def test_the_script_prints_each_arm_and_draws_both_sweeps(tmp_path: Path) -> None:
    make_sweep(tmp_path / "mup", lambda d: 0.04)
    make_sweep(tmp_path / "sp", lambda d: 0.16 * 24 / d, par="sp")
    fig = tmp_path / "best_lr.png"
    proc = run_script(
        "scripts/best_lr_vs_n.py", str(tmp_path / "mup"), str(tmp_path / "sp"), "--out", str(fig)
    )
    assert proc.returncode == 0, proc.stderr
    heads = [line for line in proc.stdout.splitlines() if " | " in line]
    assert [h.split(" | ")[1:3] for h in heads] == [
        ["gelu", "mup"],
        ["swiglu", "mup"],
        ["gelu", "sp"],
        ["swiglu", "sp"],
    ]
    assert heads[0].endswith("| holds") and "drifts (2.0 grid steps" in heads[3]
    assert "(point 3 of 5)" in proc.stdout and fig.stat().st_size > 10_000


def test_the_script_refuses_a_directory_without_a_ladder(tmp_path: Path) -> None:
    proc = run_script("scripts/best_lr_vs_n.py", str(tmp_path))
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"error: {tmp_path} holds no ladder sweep (no ablation.json with a ladder)"


def test_a_rung_without_results_gets_no_verdict_not_a_number(tmp_path: Path) -> None:
    """Every job of the top rung failed (killed): no best LR there, so no drift and no verdict."""
    make_sweep(tmp_path, lambda d: 0.04)
    for job in tmp_path.iterdir():
        overrides = job / ".hydra" / "overrides.yaml"
        if overrides.is_file() and "model.n_embd=96" in yaml.safe_load(overrides.read_text()):
            (job / "metrics.json").write_text(json.dumps({"status": "failed"}))
    for arm in analyse(tmp_path):
        assert [r.lr is None for r in arm.rungs] == [False, False, True]
        assert (arm.drift_steps, arm.slope) == (None, None)
        assert arm.verdict == "no verdict: a rung has no best LR"
    proc = run_script("scripts/best_lr_vs_n.py", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert "no verdict: a rung has no best LR" in proc.stdout and "(no result)" in proc.stdout
