"""Statistics an ablation needs over a handful of seeds: Student-t intervals and LR sensitivity.

No scipy: the project does not depend on it, and the t quantile is one integral. The CDF of the
t distribution is integrated (Simpson) from its density and inverted by bisection; with 3–10 seeds
that is exact to far more digits than any loss difference means.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

LEVEL = 0.95  # every interval in the report


def t_pdf(x: float, df: float) -> float:
    """Density of Student's t with `df` degrees of freedom (df may be fractional: Welch)."""
    log_c = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    return math.exp(log_c - (df + 1) / 2 * math.log1p(x * x / df))


def t_cdf(x: float, df: float, intervals: int = 2000) -> float:
    """P(T <= x), by Simpson's rule on [0, |x|] (the density is smooth and symmetric)."""
    a = abs(x)
    h = a / intervals
    s = t_pdf(0.0, df) + t_pdf(a, df)
    for i in range(1, intervals):
        s += (4 if i % 2 else 2) * t_pdf(i * h, df)
    half = s * h / 3
    return 0.5 + half if x >= 0 else 0.5 - half


@lru_cache(maxsize=256)
def t_quantile(p: float, df: float) -> float:
    """The p-quantile of Student's t (p > 0.5): Newton steps on t_cdf from 0. The cdf is concave
    on x > 0, so every tangent crosses p left of the root and the steps climb to it monotonically."""
    if not 0.5 < p < 1 or df <= 0:
        raise ValueError(f"t_quantile needs 0.5 < p < 1 and df > 0, got p={p}, df={df}")
    x = 0.0
    for _ in range(100):
        step = (t_cdf(x, df) - p) / t_pdf(x, df)
        x -= step
        if abs(step) < 1e-12 * max(1.0, x):
            break
    return x


@dataclass(frozen=True)
class Interval:
    """A mean (or a mean difference) with its two-sided LEVEL confidence interval."""

    mean: float
    low: float
    high: float
    n: int
    df: float
    test: str  # how the interval was made, for the table: "t", "paired t", "Welch t"
    clipped: bool = False  # cut to the range the quantity cannot leave (see `clip_interval`)

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2


def _t_interval(mean: float, se: float, df: float, n: int, test: str) -> Interval:
    if df <= 0 or not math.isfinite(se):
        return Interval(mean, math.nan, math.nan, n, df, test)
    q = t_quantile(0.5 + LEVEL / 2, df)
    return Interval(mean, mean - q * se, mean + q * se, n, df, test)


def mean_interval(values: Sequence[float]) -> Interval:
    """Mean over seeds with a t interval (df = n - 1); NaN bounds for a single seed."""
    n = len(values)
    if n == 0:
        raise ValueError("mean_interval of no values")
    mean = statistics.fmean(values)
    if n < 2:
        return Interval(mean, math.nan, math.nan, n, 0, "t")
    return _t_interval(mean, statistics.stdev(values) / math.sqrt(n), n - 1, n, "t")


def paired_difference(a: Sequence[float], b: Sequence[float]) -> Interval:
    """a - b for values paired by seed (same seeds, same order): a t interval on the differences."""
    if len(a) != len(b):
        raise ValueError("paired_difference needs one value of each arm per seed")
    d = mean_interval([x - y for x, y in zip(a, b, strict=True)])
    return replace(d, test="paired t") if len(a) >= 2 else no_interval(d.mean, len(a))


def welch_difference(a: Sequence[float], b: Sequence[float]) -> Interval:
    """a - b for independent samples: Welch's t with the Welch–Satterthwaite degrees of freedom
    (fewer than 2 values on either side: no interval, no test)."""
    na, nb = len(a), len(b)
    mean = statistics.fmean(a) - statistics.fmean(b)
    if na < 2 or nb < 2:
        return no_interval(mean, min(na, nb))
    va, vb = statistics.variance(a) / na, statistics.variance(b) / nb
    se = math.sqrt(va + vb)
    if se == 0:
        return Interval(mean, mean, mean, na + nb, math.inf, "Welch t")
    df = (va + vb) ** 2 / (va**2 / (na - 1) + vb**2 / (nb - 1))
    return _t_interval(mean, se, df, na + nb, "Welch t")


def clip_interval(i: Interval, low: float, high: float) -> Interval:
    """The t interval cut to [low, high], for a quantity that cannot leave that range (LR
    sensitivity lies in [0, loss at init]); `clipped` is set when a bound moved. The mean is kept."""
    if not (math.isfinite(i.low) and math.isfinite(i.high)):
        return i
    lo, hi = max(i.low, low), min(i.high, high)
    return replace(i, low=lo, high=hi, clipped=lo != i.low or hi != i.high)


def no_interval(mean: float, n: int) -> Interval:
    """A difference over fewer than 2 seeds: the mean alone, no t statistic (df would be 0)."""
    return Interval(mean, math.nan, math.nan, n, math.nan, "none")


def verdict(diff: Interval) -> str:
    """Lower loss is better: the arm is better when the whole interval of (arm - baseline) is < 0."""
    if not (math.isfinite(diff.low) and math.isfinite(diff.high)):
        return f"{diff.n} seed: no interval" if diff.n == 1 else "no interval"
    if diff.high < 0:
        return "better"
    if diff.low > 0:
        return "worse"
    return "within noise"


def lr_sensitivity(losses: Sequence[float | None], loss_at_init: float) -> float:
    """Wortsman et al. 2023: E over the LR grid of min(loss, loss_at_init) - min over the grid.

    `losses` holds one final loss per LR of the grid; None or a non-finite value is a run that
    diverged and counts at `loss_at_init`, as does any loss above it.
    """
    if not losses:
        raise ValueError("lr_sensitivity of an empty LR grid")
    clipped = [loss_at_init if v is None or not math.isfinite(v) else min(v, loss_at_init) for v in losses]
    return statistics.fmean(clipped) - min(clipped)
