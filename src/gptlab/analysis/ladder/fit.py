"""The ladder's fits and verdicts: per arm a curve L(N) over the rungs' best-LR points (a power law,
or its log-linear limit), the gap of two curves extrapolated beyond the largest rung, where they
cross, and the words the report gives each (`gptlab.analysis.ladder.analyse` feeds it the points).

Verdict, for each arm against the baseline. g(N) = fitted L_arm(N) − L_base(N); s = the sign of
g at the largest rung; the change is D = s·(g(10·N_max) − g(N_max)), with its interval:
- *inconclusive* when a fit did not converge, when the gap at the largest rung (fitted) is not
  resolved (its interval holds 0: there is no difference whose trend to call), or when D's
  interval holds 0 but reaches beyond ±HOLD_FRACTION·|g(N_max)|;
- *flips* when g(10·N_max)'s interval lies wholly on the other side of 0;
- *widens* when D's interval is above 0, *narrows* when below;
- *holds* when D's interval holds 0 and lies within ±HOLD_FRACTION·|g(N_max)|.
When a planned job has no result, the verdict is prefixed "incomplete" (the rule of the plain
report: a best LR may have come from a partial curve).

A power law can only slow down in ln N. When an arm's losses do not (α runs to the search's lower
bound: no E can be fitted), the arm gets the law's α → 0 limit L = c − b·ln N instead, fitted to
the same points with the same bootstrap, labelled in the fit table and in the verdict: it
extrapolates a loss that falls without bound, so it says what the ladder's own trend implies at
10× N, not where the curve must end.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from gptlab.analysis.ladder import powerlaw
from gptlab.analysis.ladder.records import ArmFit, Extrapolation, Model, Trend

MIN_RUNGS = 3  # a 3-parameter curve needs at least 3 sizes
EXTRAPOLATE = 10.0  # the gap is extrapolated to this multiple of the largest rung's N
HOLD_FRACTION = 0.5  # "holds": the change stays within this share of the gap at the largest rung
CROSS_RANGE = (1.0, 1000.0)  # crossover searched from the smallest rung to 1000 × the largest


def best_points(values: np.ndarray, complete: np.ndarray) -> np.ndarray:
    """(B, R, K, S) per-seed losses at the best LR of each (resample, rung, arm): the lowest mean
    among the complete LRs (NaN where an arm has none at a rung)."""
    means = np.where(complete[None], values.mean(-1), np.inf)  # (B, R, K, LR)
    best = np.argmin(means, axis=-1)  # (B, R, K)
    picked = np.take_along_axis(values, best[..., None, None], axis=-2)[..., 0, :]
    return np.where(complete.any(-1)[None, ..., None], picked, np.nan)


def fit_curves(size: np.ndarray, points: np.ndarray) -> powerlaw.Fit:
    """Fit every (batch, arm): points (B, R, K, S) at sizes (K, R) → a Fit of batch shape (B, K)."""
    b, r, k, s = points.shape
    y = np.moveaxis(points, 2, 1).reshape(b, k, r * s)  # (B, K, R·S)
    n = np.repeat(size, s, axis=1)  # (K, R·S)
    return powerlaw.fit_power_law(n, y)


def _valid(fit: powerlaw.Fit) -> np.ndarray:
    return fit.converged & (fit.A > 0)


def arm_fit(
    arm: str, against: str, point: powerlaw.Fit, boot: powerlaw.Fit, k: int, n: int,
    size: np.ndarray, point_y: np.ndarray, boot_y: np.ndarray,
) -> tuple[ArmFit, Model | None]:  # fmt: skip
    """The arm's row of the fit table, and its curve for the extrapolation. A power law whose α runs
    to the lower bound (the losses fall with ln N without slowing down: no E can be fitted) is
    replaced by its α → 0 limit L = c − b·ln N, fitted to the same points and labelled as such;
    on the upper bound (a step) or with A <= 0 there is no curve."""
    if not point.converged[0, k] and point.alpha[0, k] < 2 * powerlaw.ALPHA_MIN:
        limit_p = _fit_limit(size, point_y[None])
        limit_b = _fit_limit(size, boot_y)
        ok = limit_b.b[:, k] > 0
        slope = powerlaw.estimate(float(limit_p.b[0, k]), limit_b.b[:, k], n)
        why = "α → 0 (no slowing over the rungs, no E): its limit L = c − b·ln N fitted"
        row = ArmFit(arm, against, None, None, None, why, slope=slope)
        if not limit_p.b[0, k] > 0:
            row.status = "the loss rises with size (b <= 0 in L = c − b·ln N): no falling curve"
            return row, None

        def at(fit: powerlaw.LogLinearFit):  # noqa: ANN202
            return lambda x: fit.predict(np.asarray(x)[..., None])[..., k]

        row.curve = at(limit_p)
        return row, Model(at(limit_p), at(limit_b), ok, "log-linear limit")
    if not point.converged[0, k]:
        return ArmFit(
            arm, against, None, None, None, f"not converged (α at its search bound {point.alpha[0, k]:.3g})"
        ), None
    if not point.A[0, k] > 0:
        return ArmFit(arm, against, None, None, None, "A <= 0: the loss does not fall with size"), None
    ok = _valid(boot)[:, k]

    def est(values: np.ndarray, p: float, log: bool = False) -> powerlaw.Estimate:
        return powerlaw.estimate(p, np.where(ok, values[:, k], np.nan), n, log=log)

    status = "converged" if ok.mean() == 1 else f"converged ({ok.mean():.0%} of resamples)"
    row = ArmFit(
        arm, against, est(boot.E, float(point.E[0, k])), est(boot.A, float(point.A[0, k]), log=True),
        est(boot.alpha, float(point.alpha[0, k])), status,
    )  # fmt: skip

    def curve(fit: powerlaw.Fit):  # noqa: ANN202
        return lambda x: fit.predict(np.asarray(x)[..., None])[..., k]

    row.curve = curve(point)
    return row, Model(curve(point), curve(boot), ok, "power law")


def _fit_limit(size: np.ndarray, points: np.ndarray) -> powerlaw.LogLinearFit:
    b, r, k, s = points.shape
    y = np.moveaxis(points, 2, 1).reshape(b, k, r * s)
    return powerlaw.fit_log_linear(np.repeat(size, s, axis=1), y)


def _crossover(curve: Any, other: Any, lo: float, hi: float) -> np.ndarray:
    """The smallest N in [lo, hi] where two fitted curves cross, per resample (NaN: none)."""
    grid = np.exp(np.linspace(math.log(lo), math.log(hi), 2001))
    diff = curve(grid[:, None]) - other(grid[:, None])  # (G, B)
    sign = np.sign(diff)
    change = sign[1:] != sign[:-1]
    out = np.full(diff.shape[1], np.nan)
    first = np.argmax(change, axis=0)
    for b in np.nonzero(change.any(0))[0]:  # interpolate the crossing in log N
        i = first[b]
        d0, d1 = diff[i, b], diff[i + 1, b]
        t = d0 / (d0 - d1) if d0 != d1 else 0.0
        out[b] = math.exp(math.log(grid[i]) + t * (math.log(grid[i + 1]) - math.log(grid[i])))
    return out


def extrapolate(
    arm: str, baseline: str, model: Model | None, base: Model | None, base_sizes: np.ndarray, n: int,
    where: str = "the largest rung", axis: str = "N",
) -> Extrapolation:  # fmt: skip
    """The gap of two fitted curves at the largest size and at EXTRAPOLATE × it, its change and
    where the curves cross, with the verdict (`where` names the largest point in its words, `axis`
    the variable in the log-linear note: a budget sweep extrapolates in tokens D)."""
    n_max = float(base_sizes.max())
    n_ext = EXTRAPOLATE * n_max
    if model is None or base is None:
        names = ", ".join(a for a, m in ((arm, model), (baseline, base)) if m is None)
        why = f"inconclusive: no falling curve fitted for {names} (the fit table says why)"
        return Extrapolation(arm, baseline, n_max, n_ext, None, None, None, None, why)
    ok = model.valid & base.valid

    def gap(which: str, at: float) -> np.ndarray:
        return getattr(model, which)(np.array(at)) - getattr(base, which)(np.array(at))

    last_p, ext_p = float(gap("point", n_max)[0]), float(gap("point", n_ext)[0])
    s = 1.0 if last_p >= 0 else -1.0
    last_b, ext_b = np.where(ok, gap("boot", n_max), np.nan), np.where(ok, gap("boot", n_ext), np.nan)
    gap_last = powerlaw.estimate(last_p, last_b, n)
    gap_ext = powerlaw.estimate(ext_p, ext_b, n)
    change = powerlaw.estimate(s * (ext_p - last_p), s * (ext_b - last_b), n)
    lo, hi = float(base_sizes.min()) * CROSS_RANGE[0], n_max * CROSS_RANGE[1]
    cross_p = float(_crossover(model.point, base.point, lo, hi)[0])
    cross_b = np.where(ok, _crossover(model.boot, base.boot, lo, hi), np.nan)
    crossover = None
    if math.isfinite(cross_p) or np.isfinite(cross_b).any():
        crossover = powerlaw.estimate(cross_p, cross_b, n, log=True)
    verdict = ladder_verdict(gap_last, gap_ext, change, where)
    limits = [name for name, m in ((arm, model), (baseline, base)) if m.kind == "log-linear limit"]
    if limits:
        names = ", ".join(limits)
        verdict += f" (on the log-linear limit for {names}: no E, the loss falls with ln {axis} unbounded)"
    return Extrapolation(arm, baseline, n_max, n_ext, gap_last, gap_ext, change, crossover, verdict)


def trend(
    arm: str, baseline: str, log_n: np.ndarray, point: np.ndarray, boot: np.ndarray,
    last: powerlaw.Estimate | None, n: int,
) -> Trend:  # fmt: skip
    """The gap's least-squares slope on log10 N over the rungs, and what it says (`Trend`)."""
    x = log_n - log_n.mean()

    def slope(y: np.ndarray) -> np.ndarray:
        return ((y - y.mean(-1, keepdims=True)) * x).sum(-1) / (x * x).sum()

    per = powerlaw.estimate(float(slope(point)), slope(boot), n)
    if last is None or not math.isfinite(per.low):
        return Trend(arm, baseline, per, "no interval")
    s = 1.0 if last.value > 0 else -1.0
    low, high = sorted((s * per.low, s * per.high))
    verdict = (
        "widens over the rungs" if low > 0 else "narrows over the rungs" if high < 0 else "no trend resolved"
    )
    if not last.excludes_zero:
        verdict += " (the largest rung's own gap is not resolved)"
    return Trend(arm, baseline, per, verdict)


def ladder_verdict(
    gap_last: powerlaw.Estimate, gap_ext: powerlaw.Estimate, change: powerlaw.Estimate,
    where: str = "the largest rung",
) -> str:  # fmt: skip
    """widens / narrows / holds / flips / inconclusive (the rule in this module's docstring)."""
    if not all(math.isfinite(e.low) for e in (gap_last, gap_ext, change)):
        return "inconclusive: no interval (too few seeds or resamples that converged)"
    if not gap_last.excludes_zero:
        return f"inconclusive: no resolved gap at {where}"
    s = 1.0 if gap_last.value > 0 else -1.0
    if (s > 0 and gap_ext.high < 0) or (s < 0 and gap_ext.low > 0):
        return "flips"
    if change.low > 0:
        return "widens"
    if change.high < 0:
        return "narrows"
    bound = HOLD_FRACTION * abs(gap_last.value)
    if -bound <= change.low and change.high <= bound:
        return "holds"
    return f"inconclusive: the change's interval reaches beyond ±{HOLD_FRACTION:.0%} of the gap"
