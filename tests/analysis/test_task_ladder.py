"""The ladder of a task's bpb (issue 38, item 4; Bhagia et al. 2024's first step) on a hand-made
ladder sweep (no training): each job's val loss follows one power law in N (tests/analysis/
test_ladder_report.py's sweep) and its `tasks` bpb another, plus seed noise and an LR penalty that
puts the bpb's best LR at each rung's lowest LR (the val loss's is the middle one).

Oracle: the best LR per (rung, arm) picked here from the bpb the test wrote, and
scipy.optimize.curve_fit of E + A·N^(−α) on the per-seed bpb at those LRs; the per-rung means and
their t intervals by scipy.stats.t.ppf."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import numpy as np
import yaml
from scipy import optimize
from scipy import stats as scipy_stats

from gptlab.analysis.report import parse_table, write_report
from tests.analysis.test_ladder_report import WIDTHS, make_sweep, n_of
from tests.printed import Printed

TASK = "val_continuation"
A_LOSS = 1.0 * n_of(24) ** 0.3
LOSS_LAWS = {"gelu": (1.8, A_LOSS, 0.3), "swiglu": (1.8, 0.8 * A_LOSS, 0.3)}
A_BPB = 1.2 * n_of(24) ** 0.5
BPB_LAWS = {"gelu": (0.9, A_BPB, 0.5), "swiglu": (0.95, 0.7 * A_BPB, 0.5)}  # the bpb's own law


def law(n: float, e: float, a: float, alpha: float) -> float:
    return e + a * n ** (-alpha)


def add_task_bpb(root: Path, rung_lrs: dict[str, list[str]]) -> dict[tuple[int, str, float, str], float]:
    """Write each job's `tasks` entry; returns (width, arm, lr, seed) → bpb."""
    rng = np.random.default_rng(7)
    shared = {s: rng.normal(0, 0.003) for s in ("1", "2", "3")}
    out = {}
    for d in sorted((d for d in root.iterdir() if d.name.isdigit()), key=lambda d: int(d.name)):
        m = json.loads((d / "metrics.json").read_text())
        v = dict(o.split("=", 1) for o in yaml.safe_load((d / ".hydra" / "overrides.yaml").read_text()))
        width, arm, lr, seed = int(v["model.n_embd"]), v["model/ffn"], float(v["optim.lr"]), v["seed"]
        lowest = min(float(x) for x in rung_lrs[str(width)])
        bpb = law(n_of(width), *BPB_LAWS[arm]) + shared[seed] + rng.normal(0, 0.002)
        bpb += 0.08 * math.log(lr / lowest) ** 2
        entry = {"acc": 0.3, "acc_norm": 0.31, "bpb": bpb, "items": 100, "chance": 0.25, "step": 200}
        (d / "metrics.json").write_text(json.dumps({**m, "tasks": {TASK: entry}}))
        out[(width, arm, lr, seed)] = bpb
    return out


def num(cell: str) -> tuple[float, float, float]:
    head, _, rest = cell.partition(" [")
    low, high = rest.split("]")[0].split(", ")
    return float(head), float(low), float(high)


def test_the_task_bpb_ladder_is_fitted_per_arm_like_the_val_loss(tmp_path: Path) -> None:
    bpb = add_task_bpb(tmp_path, make_sweep(tmp_path, LOSS_LAWS))
    text = write_report(tmp_path, figures=False).read_text()
    assert f"### Task `{TASK}`: bpb against N" in text and "Bhagia et al. 2024" in text
    rungs = parse_table(text, f"#### `{TASK}` bpb per rung")
    fits = {(r["arm"], r["against"]): r for r in parse_table(text, f"#### `{TASK}` bpb: fitted curves")}
    for arm in ("gelu", "swiglu"):
        n, y = [], []
        for r, width in zip(rungs, WIDTHS, strict=True):
            lrs = sorted({lr for (w, a, lr, _) in bpb if w == width and a == arm})
            means = {lr: statistics.fmean(bpb[(width, arm, lr, s)] for s in "123") for lr in lrs}
            best = min(means, key=means.__getitem__)
            assert best == lrs[0]  # the LR penalty the test placed; the val loss's best is lrs[1]
            assert r[f"`{arm}` best LR"] == f"{best:.3g} (grid edge)"
            seeds = [bpb[(width, arm, best, s)] for s in "123"]
            half = scipy_stats.t.ppf(0.975, 2) * statistics.stdev(seeds) / math.sqrt(3)
            mean = statistics.fmean(seeds)
            assert r[f"`{arm}` `{TASK}` bpb"] == Printed(
                "{:.4f} [{:.4f}, {:.4f}]", mean, mean - half, mean + half
            )
            n += [n_of(width)] * 3
            y += seeds
        (e, a, alpha), _ = optimize.curve_fit(
            law, np.array(n, float), np.array(y), p0=BPB_LAWS[arm], maxfev=20000
        )
        row = fits[(f"`{arm}`", "N")]
        assert row["fit"] == "converged"
        got_e, got_a, got_alpha = num(row["E [95% CI]"]), num(row["A [95% CI]"]), num(row["α [95% CI]"])
        assert abs(got_e[0] - e) < 1e-3 and abs(got_alpha[0] - alpha) < 2e-3, (row, e, a, alpha)
        assert abs(got_a[0] / a - 1) < 0.01  # printed to 3 significant digits
        truth = BPB_LAWS[arm]
        assert got_alpha[1] <= truth[2] <= got_alpha[2] and got_e[1] <= truth[0] <= got_e[2]
    (ext,) = parse_table(text, f"#### `{TASK}` bpb: the gap extrapolated")
    assert ext["arm"] == "`swiglu`" and ext["baseline"] == "`gelu`"
    # the val loss's own ladder above is unchanged: its α is the val-loss law's 0.3, not the bpb's 0.5
    loss_fit = {(r["arm"], r["against"]): r for r in parse_table(text, "### Fitted curves")}
    assert abs(num(loss_fit[("`gelu`", "N")]["α [95% CI]"])[0] - 0.3) < 0.03
