"""L(D) = E + B·D^(−β) per arm of a budget sweep (gptlab.analysis.budgets.fit): the fit against
scipy.optimize.curve_fit on synthetic losses with a known E, B and β, the gap extrapolated from
scipy's curves, and the cases where nothing fits, reported with the reason (too few budgets, β → 0,
one arm without a law). The sweep's jobs are built in memory as the report reads them (branch jobs
with their overrides and metrics.json), so the fit is read through the report's own cells."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from scipy.optimize import curve_fit

from gptlab.analysis.budgets.fit import BETA_ZERO, E_NEGATIVE, fit_budgets
from gptlab.analysis.budgets.report import budget_cells, budget_section
from gptlab.analysis.sweep.jobs import Job

SEEDS = ["1", "2", "3"]
LRS = ["0.001", "0.01"]
PER_STEP = 128  # tokens a step: D = steps × 128
TRUE = {"gelu": (2.0, 40.0, 0.5), "swiglu": (1.9, 60.0, 0.55)}  # (E, B, β) in tokens


def law(d: np.ndarray, e: float, b: float, beta: float) -> np.ndarray:
    return e + b * d ** (-beta)


def sweep(steps: list[int], loss) -> tuple[list[Job], dict]:  # noqa: ANN001
    """Branch jobs of 2 arms × 2 LRs × 3 seeds per budget; `loss(arm, steps, seed)` at LR 0.01, the
    other LR 0.1 worse (so the best LR is 0.01 at every budget and in every resample)."""
    jobs = []
    for b in steps:
        for arm in TRUE:
            for lr in LRS:
                for s in SEEDS:
                    y = loss(arm, b, int(s)) + (0.1 if lr == "0.001" else 0.0)
                    over = [f"model/ffn={arm}", f"optim.lr={lr}", f"seed={s}", f"trainer.max_steps={b}",
                            "branch_from=/s/0", f"branch.at={b - 1}", "optim.decay_steps=1"]  # fmt: skip
                    jobs.append(Job(str(len(jobs)), None, over, {"final_val_loss": y}, "finished"))
    record = {"arm": "model/ffn", "arms": list(TRUE), "baseline": "gelu", "seeds": SEEDS, "lrs": LRS,
              "budgets": [[b, b - 1, 1] for b in steps], "jobs": [j.overrides for j in jobs]}  # fmt: skip
    return jobs, record


def power_loss(arm: str, steps: int, seed: int) -> float:
    noise = 0.004 * math.sin(7.0 * seed + steps)  # a fixed, seed- and budget-dependent wobble
    return float(law(np.array(steps * PER_STEP, dtype=float), *TRUE[arm])) + noise


STEPS = [10, 20, 40, 80, 160, 320]


def test_the_fit_matches_scipy_curve_fit_and_recovers_the_known_law() -> None:
    jobs, record = sweep(STEPS, power_loss)
    fit = fit_budgets(budget_cells(jobs, record), SEEDS, PER_STEP, "gelu")
    assert fit.note == "" and fit.unit == "tokens"
    d = np.repeat(np.array(STEPS, dtype=float) * PER_STEP, len(SEEDS))
    oracle = {}
    for row in fit.fits:
        y = np.array([power_loss(row.arm, b, int(s)) for b in STEPS for s in SEEDS])
        (e, b, beta), _ = curve_fit(law, d, y, p0=TRUE[row.arm], maxfev=20000)
        oracle[row.arm] = (e, b, beta)
        assert row.status == "converged"
        assert row.E.value == pytest.approx(e, rel=1e-5)
        assert row.A.value == pytest.approx(b, rel=1e-4)  # B, in tokens
        assert row.alpha.value == pytest.approx(beta, rel=1e-5)
        # the truth lies in the bootstrap's intervals (the noise is 0.004)
        for est, true in zip((row.E, row.A, row.alpha), TRUE[row.arm], strict=True):
            assert est.low < true < est.high
    (ext,) = fit.extrapolations
    d_max = STEPS[-1] * PER_STEP
    at = {x: np.array(x, dtype=float) for x in (d_max, 10 * d_max)}
    gap = {x: law(d, *oracle["swiglu"]) - law(d, *oracle["gelu"]) for x, d in at.items()}
    assert ext.n_ext == 10 * d_max
    assert ext.gap_last.value == pytest.approx(gap[d_max], abs=1e-5)
    assert ext.gap_ext.value == pytest.approx(gap[10 * d_max], abs=1e-5)
    assert ext.verdict in ("widens", "narrows", "holds", "flips") or ext.verdict.startswith("inconclusive")


def test_too_few_budgets_are_not_fitted_and_the_report_says_why(tmp_path: Path) -> None:
    jobs, record = sweep([10, 20], power_loss)
    text = "\n".join(budget_section(jobs, record, tmp_path, figures=False))
    assert "**No fit**: not fitted: 2 budget(s); E + B·D^(−β) has three parameters" in text
    assert "#### The gap extrapolated" not in text


def test_beta_running_to_zero_is_reported_and_no_gap_is_extrapolated(tmp_path: Path) -> None:
    def log_linear(arm: str, steps: int, seed: int) -> float:  # no slowing in ln D: β → 0
        drop = 0.1 if arm == "gelu" else 0.12
        return 3.0 - drop * math.log(steps * PER_STEP) + 0.004 * math.sin(7.0 * seed)  # a seed's offset

    jobs, record = sweep(STEPS, log_linear)
    fit = fit_budgets(budget_cells(jobs, record), SEEDS, PER_STEP, "gelu")
    assert [f.status for f in fit.fits] == [BETA_ZERO, BETA_ZERO]
    assert all(f.E is None and f.alpha is None for f in fit.fits)
    (ext,) = fit.extrapolations
    assert ext.gap_ext is None
    assert ext.verdict.startswith("inconclusive: no falling curve fitted for swiglu, gelu")
    text = "\n".join(budget_section(jobs, record, tmp_path, figures=False))
    assert "β → 0: the loss falls with ln D without slowing" in text


def test_one_arm_without_a_law_leaves_the_gap_unextrapolated() -> None:
    def mixed(arm: str, steps: int, seed: int) -> float:
        if arm == "swiglu":
            return 3.0 - 0.1 * math.log(steps * PER_STEP) + 0.004 * math.sin(7.0 * seed)
        return power_loss(arm, steps, seed)

    jobs, record = sweep(STEPS, mixed)
    fit = fit_budgets(budget_cells(jobs, record), SEEDS, PER_STEP, "gelu")
    assert [f.status for f in fit.fits] == ["converged", BETA_ZERO]
    (ext,) = fit.extrapolations
    assert ext.gap_last is None and "no falling curve fitted for swiglu" in ext.verdict


def test_a_law_whose_floor_runs_below_zero_is_not_fitted(tmp_path: Path) -> None:
    """GELU's means in docs/ablations.md's budgets row (2.2580, 2.0617, 1.8657 at 100, 200, 400 steps
    of 1,024 tokens) fall by 0.196 per doubling twice: three points through E + B·D^(−β) give β ≈ 0.002
    and E ≈ −174, which an earlier report printed as a fit. Such an E is no loss floor: not fitted."""
    means = {100: 2.2580, 200: 2.0617, 400: 1.8657}

    def measured(arm: str, steps: int, seed: int) -> float:
        return means[steps] + (0.0 if arm == "gelu" else -0.05) + 0.002 * math.sin(7.0 * seed)

    jobs, record = sweep(list(means), measured)
    fit = fit_budgets(budget_cells(jobs, record), SEEDS, 1024, "gelu")
    assert fit.fits[0].status == E_NEGATIVE and fit.fits[0].E is None
    d, y = np.array(list(means), dtype=float) * 1024, np.array(list(means.values()))
    (e, _, beta), _ = curve_fit(law, d, y, p0=(-100.0, 100.0, 0.01), maxfev=200_000)  # the oracle's law
    assert e < 0 and 0 < beta < 0.05  # what the report declines to print as a floor
    text = "\n".join(budget_section(jobs, record, tmp_path, figures=False))
    assert "E < 0: the law through these losses runs below zero loss" in text
