"""L(D) = E + B·D^(−β) per arm of a sweep over token budgets, with the ladder's machinery: the same
least-squares fit (`gptlab.analysis.ladder.powerlaw.fit_power_law`, variable projection over the
exponent), the same bootstrap over seeds (one draw of seeds for every budget and arm, each arm's best
LR picked again in every resample, estimate ± t(n−1)·SE) and the same extrapolated gap and verdict
(`gptlab.analysis.ladder.fit.extrapolate`), with D, the tokens of a budget, in place of N.

Unlike the ladder, an arm whose β runs to the search's lower bound gets no log-linear stand-in:
its losses fall with ln D without slowing over the budgets, so E (the loss at infinite data) is not
identifiable from them, and the report says so rather than extrapolating a loss that falls without
bound. The gap is extrapolated only where both arms' laws fit.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from gptlab.ablation.budgets import STEPS_KEY
from gptlab.analysis.ladder import powerlaw
from gptlab.analysis.ladder.analyse import cell_values
from gptlab.analysis.ladder.fit import MIN_RUNGS, best_points, extrapolate, fit_curves
from gptlab.analysis.ladder.records import ArmFit, Extrapolation, Model
from gptlab.analysis.sweep.arms import Cell

MIN_BUDGETS = MIN_RUNGS  # three parameters: at least three budgets
BETA_ZERO = (
    "β → 0: the loss falls with ln D without slowing over the budgets, so E (the loss at infinite "
    "data) is not identifiable from them; no law fitted"
)
E_NEGATIVE = (
    "E < 0: the law through these losses runs below zero loss (β near 0: they fall with ln D without "
    "slowing), so no loss floor is identifiable from them; no law fitted"
)


@dataclass
class DataLaw:
    """The fits of one budget sweep. `fits` reuse the ladder's ArmFit with `against` = "D" (its A and
    alpha are this law's B and β); `note` says why nothing was fitted, when nothing was."""

    unit: str  # "tokens", or "steps" when the tokens a step are unknown
    sizes: list[float]  # D of each budget in the fit
    fits: list[ArmFit] = field(default_factory=list)
    extrapolations: list[Extrapolation] = field(default_factory=list)
    note: str = ""


def arm_law(
    arm: str, k: int, point: powerlaw.Fit, boot: powerlaw.Fit, n_seeds: int
) -> tuple[ArmFit, Model | None]:
    """One arm's row (E, B, β with intervals, or why there are none) and its curve."""
    beta = float(point.alpha[0, k])
    if not point.converged[0, k]:
        if beta < 2 * powerlaw.ALPHA_MIN:
            return ArmFit(arm, "D", None, None, None, BETA_ZERO), None
        why = f"not converged (β at its search bound {beta:.3g}: a step in D, no power law)"
        return ArmFit(arm, "D", None, None, None, why), None
    if not point.A[0, k] > 0:
        return ArmFit(arm, "D", None, None, None, "B <= 0: the loss does not fall with tokens"), None
    if not point.E[0, k] >= 0:  # a cross-entropy is never below 0: such an E is no floor
        return ArmFit(arm, "D", None, None, None, E_NEGATIVE), None
    ok = boot.converged[:, k] & (boot.A[:, k] > 0) & (boot.E[:, k] >= 0)

    def est(values: np.ndarray, p: float, log: bool = False) -> powerlaw.Estimate:
        return powerlaw.estimate(p, np.where(ok, values[:, k], np.nan), n_seeds, log=log)

    status = "converged" if ok.mean() == 1 else f"converged ({ok.mean():.0%} of resamples)"
    row = ArmFit(
        arm, "D", est(boot.E, float(point.E[0, k])), est(boot.A, float(point.A[0, k]), log=True),
        est(boot.alpha, beta), status,
    )  # fmt: skip

    def curve(fit: powerlaw.Fit):  # noqa: ANN202
        return lambda x: fit.predict(np.asarray(x)[..., None])[..., k]

    row.curve = curve(point)
    return row, Model(curve(point), curve(boot), ok, "power law")


def fit_values(
    vals: np.ndarray, steps: list[int], per_step: int | None, arms: list[str], baseline: str
) -> DataLaw:
    """The laws from the results `vals` (budgets, arms, LRs, seeds), budgets of `steps` steps of
    `per_step` tokens (None: D in steps)."""
    unit = "tokens" if per_step else "steps"
    sizes = [float(b * (per_step or 1)) for b in steps]
    law = DataLaw(unit, sizes)
    complete = np.isfinite(vals).all(-1)  # (R, K, LR): every seed has a result there
    used = [i for i in range(len(steps)) if complete[i].any(-1).all()]
    if len(steps) < MIN_BUDGETS:
        law.note = (
            f"not fitted: {len(steps)} budget(s); E + B·D^(−β) has three parameters and needs at least "
            f"{MIN_BUDGETS} budgets (hydra.sweeper.budgets)"
        )
        return law
    if len(used) < MIN_BUDGETS:
        law.note = (
            f"not fitted: {len(used)} of {len(steps)} budgets have a complete LR for every arm "
            f"(the fit needs {MIN_BUDGETS})"
        )
        return law
    law.sizes = [sizes[i] for i in used]
    n_seeds = vals.shape[-1]
    draws = powerlaw.seed_resamples(n_seeds)
    boot_best = best_points(powerlaw.resample(np.nan_to_num(vals), draws), complete)[:, used]
    point_best = best_points(vals[None], complete)[:, used]  # (1, R, K, S)
    size = np.tile(np.array(law.sizes), (len(arms), 1))  # (K, R): every arm sees the same D
    point, boot = fit_curves(size, point_best), fit_curves(size, boot_best)
    models = {}
    for k, arm in enumerate(arms):
        row, models[arm] = arm_law(arm, k, point, boot, n_seeds)
        law.fits.append(row)
    largest = "the largest budget"
    for arm in arms:
        if arm != baseline:
            ext = extrapolate(arm, baseline, models[arm], models[baseline], size[0], n_seeds, largest, "D")
            law.extrapolations.append(ext)
    return law


def fit_budgets(cells: list[Cell], seeds: list[str], per_step: int | None, baseline: str) -> DataLaw:
    """The laws of a budget sweep's cells (one per budget, `trainer.max_steps` = its steps)."""
    steps = [int(c.values[STEPS_KEY]) for c in cells]
    arms = [a.arm for a in cells[0].arms] if cells else []
    return fit_values(cell_values(cells, seeds), steps, per_step, arms, baseline)
