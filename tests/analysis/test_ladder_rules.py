"""Two of the ladder's rules as docs/ablations.md states them, checked case by case (issue 48 §6).

Which rungs are fitted: a rung enters the fit when *every arm has a complete LR there* (an LR where
every seed has a result; `LadderResult.used`), so one unfinished job at a rung's worse LR keeps the
rung, while an arm with a gap at every LR drops it. Oracle: hand-made sweeps
(tests/analysis/test_ladder_report.py's `make_sweep`) with one job set back to running, and scipy's
curve_fit on the per-seed losses the test reads back from the job files at each rung's best
complete LR, on the rungs the rule keeps.

When a change *holds*: the change's interval inside ±50% of the gap at the largest rung, both ends
(boundaries included); one end beyond is inconclusive. Oracle: intervals worked out by hand around a
gap of ±0.2 (the bound 0.1, exact in binary floating point: 0.2 halved).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from scipy.optimize import curve_fit

from gptlab.analysis.ladder.cli import analysed, ladder_record
from gptlab.analysis.ladder.fit import ladder_verdict
from gptlab.analysis.ladder.powerlaw import Estimate
from tests.analysis.test_ladder_report import WIDTHS, _law, make_sweep, n_of

A = 1.0 * n_of(24) ** 0.3
LAWS = {"gelu": (1.8, A, 0.3), "swiglu": (1.8, 0.8 * A, 0.3)}


def jobs(root: Path) -> list[tuple[Path, dict[str, str]]]:
    """(job dir, its overrides as a dict) of every job of the sweep."""
    out = []
    for d in sorted(p for p in root.iterdir() if (p / ".hydra" / "overrides.yaml").is_file()):
        overrides = yaml.safe_load((d / ".hydra" / "overrides.yaml").read_text())
        out.append((d, dict(o.split("=", 1) for o in overrides)))
    return out


def set_running(root: Path, width: int, arm: str, lr_index: int, seed: str) -> None:
    """The job at (width, arm, the rung's lr_index-th LR, seed) has not finished: metrics.json as a
    running job has it (no final loss)."""
    cell = [(d, v) for d, v in jobs(root) if int(v["model.n_embd"]) == width and v["model/ffn"] == arm]
    lrs = sorted({float(v["optim.lr"]) for _, v in cell})
    (d,) = [d for d, v in cell if float(v["optim.lr"]) == lrs[lr_index] and v["seed"] == seed]
    (d / "metrics.json").write_text(json.dumps({"status": "running"}))


def best_complete(root: Path, width: int, arm: str) -> list[float] | None:
    """Per-seed losses at the LR of lowest mean among the LRs where every seed finished (None: no
    such LR), read from the job files."""
    by_lr: dict[float, dict[str, float | None]] = {}
    for d, v in jobs(root):
        if int(v["model.n_embd"]) == width and v["model/ffn"] == arm:
            m = json.loads((d / "metrics.json").read_text())
            loss = m["final_val_loss"] if m.get("status") == "finished" else None
            by_lr.setdefault(float(v["optim.lr"]), {})[v["seed"]] = loss
    complete = [s for s in by_lr.values() if None not in s.values()]
    if not complete:
        return None
    best = min(complete, key=lambda s: float(np.mean(list(s.values()))))
    return [float(best[k]) for k in sorted(best)]  # type: ignore[arg-type]


def scipy_alpha(root: Path, widths: list[int], arm: str) -> float:
    n = np.array([n_of(d) for d in widths for _ in range(3)], dtype=float)
    y = np.array([x for d in widths for x in best_complete(root, d, arm)])  # type: ignore[union-attr]
    params, _ = curve_fit(_law, n, y, p0=(1.8, A, 0.3), maxfev=20000)
    return float(params[2])


@pytest.mark.parametrize(
    ("unfinished", "fitted"),
    [
        ([(0, "1")], WIDTHS),  # one seed short at the rung's lowest LR: the other two LRs are complete
        ([(0, "1"), (2, "2")], WIDTHS),  # two LRs short, the middle (best) one complete
        ([(0, "1"), (1, "2"), (2, "3")], [24, 48, 96]),  # a seed short at every LR: no complete LR
    ],
)
def test_a_rung_is_fitted_when_every_arm_has_a_complete_lr_there(
    tmp_path: Path, unfinished: list[tuple[int, str]], fitted: list[int]
) -> None:
    make_sweep(tmp_path, LAWS)
    for lr_index, seed in unfinished:
        set_running(tmp_path, 72, "swiglu", lr_index, seed)
    assert (best_complete(tmp_path, 72, "swiglu") is not None) is (72 in fitted)  # the rule, by hand
    res = analysed(tmp_path, ladder_record(tmp_path))
    assert res.used == [str(d) for d in fitted]
    assert res.incomplete == ["72"]  # a planned job without a result: the verdict says incomplete
    assert not res.note
    for arm in LAWS:
        (fit,) = [f for f in res.fits if f.arm == arm and f.against == "N"]
        assert fit.alpha is not None and fit.status == "converged"
        assert fit.alpha.value == pytest.approx(scipy_alpha(tmp_path, fitted, arm), abs=1e-6)


GAP = 0.2  # |gap at the largest rung|: the band is ±0.1


@pytest.mark.parametrize("sign", [1.0, -1.0])
@pytest.mark.parametrize(
    ("low", "high", "verdict"),
    [
        (-0.1, 0.1, "holds"),  # both ends on the bound: inside (the bound is included)
        (-0.05, 0.08, "holds"),
        (-0.02, 0.1000001, "inconclusive"),  # the upper end just beyond
        (-0.1000001, 0.02, "inconclusive"),  # the lower end just beyond
        (-0.05, 0.3, "inconclusive"),  # the lower end within, the upper far beyond
        (-0.3, 0.05, "inconclusive"),
        (-0.15, 0.15, "inconclusive"),  # both beyond
    ],
)
def test_holds_needs_both_ends_of_the_change_within_half_the_gap(
    sign: float, low: float, high: float, verdict: str
) -> None:
    """The change D = s·(g(10·N_max) − g(N_max)) is on the gap's own scale whatever the gap's sign
    (s folds it), so the same D intervals give the same verdicts for a gap of +0.2 and of −0.2."""
    assert 0.5 * GAP == 0.1  # the bound, exactly
    gap_last = Estimate(sign * GAP, sign * GAP - 0.03, sign * GAP + 0.03, 0.01)  # resolved
    gap_ext = Estimate(sign * GAP, sign * GAP - 0.05, sign * GAP + 0.05, 0.02)  # no flip
    change = Estimate((low + high) / 2, low, high, (high - low) / 4)
    got = ladder_verdict(gap_last, gap_ext, change)
    assert got.split(":")[0] == verdict, got
