"""L(N) = E + A·N^(−α) fitted by least squares, with intervals from a bootstrap over seeds.

Pure numpy (and scipy's t quantile), vectorised over a batch of data sets, so one call fits the
point estimate and every bootstrap resample at once (and the coverage test fits hundreds of trials
in a second).

**The fit.** For a fixed α the model is linear in (E, A), so the least-squares (E, A) and the
residual sum of squares have a closed form; the fit minimises that profiled sum over α alone
(variable projection, Golub & Pereyra 1973): a log-spaced scan of α over [ALPHA_MIN, ALPHA_MAX],
then golden-section search in the bracket around the scan's best. N is taken relative to a
reference N_ref (the geometric mean of the sizes), so the regressor N/N_ref is O(1) and the fit is
well conditioned; A is reported in the model's own units, A = A'·N_ref^α. A fit whose α lands on
the search's bound has no interior minimum (the data ask for no power law, or for a step) and is
labelled *not converged*, never reported as a number with an interval; one whose A <= 0 describes
a loss that does not fall with N, and says so.

**The bootstrap over seeds.** The seed is the unit of replication: seed s fixes the init *and the
data order* of every job with that seed, at every rung and in every arm, so two jobs sharing a seed
are not independent. A resample draws seed indices with replacement *once* and applies them to
every rung and every arm together, keeping every correlation a seed induces (the pairing between
arms that the report's paired t uses, and the one across rungs). With n <= 5 seeds every one of the
n^n ordered resamples is enumerated (exact, no Monte Carlo error); above that, RESAMPLES random
ones from a fixed generator.

Two small-sample corrections make the interval right with 3 seeds, where a plain percentile
bootstrap covers ~75% (a mean over 3 draws: [min, max] is all it can give):
- each resampled value is `m + sqrt(n/(n−1))·(v − m)` around its cell's mean m (the bootstrap
  variance of a mean is (n−1)/n of the unbiased one; this inflation removes the bias);
- the interval is `estimate ± t(0.975, n−1) · SE`, SE the bootstrap standard deviation: n − 1
  degrees of freedom, because n seeds are n independent draws whatever the number of rungs.
For a statistic linear in the data (a mean over seeds, a paired difference at one rung) this is the
Student t interval exactly; for the fitted E, A, α and the extrapolated gap it is its delta-method
analogue, and tests/analysis/test_powerlaw.py measures its coverage on synthetic power laws.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

LEVEL = 0.95
ALPHA_MIN, ALPHA_MAX = 1e-3, 4.0  # the search range of α; an estimate on a bound is not converged
SCAN = 64  # log-spaced α of the scan (ratio 1.14 between neighbours)
GOLDEN_STEPS = 40  # the bracket shrinks by 0.618 a step: to 1e-8 of its width
RESAMPLES = 4000  # random resamples when n^n is larger than EXACT_MAX
EXACT_MAX = 5**5


@dataclass(frozen=True)
class Fit:
    """Batched fit results: arrays of the batch's shape."""

    E: np.ndarray
    A: np.ndarray  # in L = E + A·N^(−α), N in parameters
    alpha: np.ndarray
    sse: np.ndarray
    n_ref: float
    converged: np.ndarray  # α strictly inside the search range

    def predict(self, n: float | np.ndarray) -> np.ndarray:
        """L at size n (per batch element; n broadcast)."""
        x = np.asarray(n, dtype=float) / self.n_ref
        a_ref = self.A * self.n_ref ** (-self.alpha)  # A' of the normalised model
        return self.E + a_ref * x ** (-self.alpha)


def _profile(logx: np.ndarray, y: np.ndarray, w: np.ndarray, alpha: np.ndarray):
    """(E, A', SSE) of the weighted linear fit y ≈ E + A'·x^(−α) for each α (batch-shaped)."""
    x = np.exp(-alpha[..., None] * logx)
    sw = w.sum(-1)
    xm = (w * x).sum(-1) / sw
    ym = (w * y).sum(-1) / sw
    dx, dy = x - xm[..., None], y - ym[..., None]
    sxx = (w * dx * dx).sum(-1)
    sxy = (w * dx * dy).sum(-1)
    a = sxy / np.where(sxx > 0, sxx, np.inf)
    e = ym - a * xm
    r = y - e[..., None] - a[..., None] * x
    return e, a, (w * r * r).sum(-1)


def fit_power_law(n: Sequence[float] | np.ndarray, y: np.ndarray, w: np.ndarray | None = None) -> Fit:
    """Least-squares fit of y = E + A·n^(−α) along the last axis of y (any leading batch shape).

    `n`: the sizes, one per point (shape (P,) or y's shape); `w`: point weights (0 drops a point).
    """
    y = np.asarray(y, dtype=float)
    n_arr = np.broadcast_to(np.asarray(n, dtype=float), y.shape)
    w = np.ones_like(y) if w is None else np.broadcast_to(np.asarray(w, dtype=float), y.shape)
    if np.any(n_arr <= 0):
        raise ValueError("power-law fit: every size must be > 0")
    n_ref = float(np.exp(np.log(n_arr[(w > 0)]).mean()))
    logx = np.log(n_arr / n_ref)
    batch = y.shape[:-1]
    grid = np.exp(np.linspace(math.log(ALPHA_MIN), math.log(ALPHA_MAX), SCAN))
    sse_scan = np.stack([_profile(logx, y, w, np.full(batch, g))[2] for g in grid], axis=-1)
    best = np.argmin(sse_scan, axis=-1)
    lo = np.log(grid[np.clip(best - 1, 0, SCAN - 1)])
    hi = np.log(grid[np.clip(best + 1, 0, SCAN - 1)])
    inv_phi = (math.sqrt(5) - 1) / 2
    c, d = hi - inv_phi * (hi - lo), lo + inv_phi * (hi - lo)
    fc = _profile(logx, y, w, np.exp(c))[2]
    fd = _profile(logx, y, w, np.exp(d))[2]
    for _ in range(GOLDEN_STEPS):  # golden section on log α, lo < c < d < hi
        left = fc < fd  # the minimum is in [lo, d]: d becomes the new c's partner, else mirror
        lo, hi = np.where(left, lo, c), np.where(left, d, hi)
        c, d = np.where(left, hi - inv_phi * (hi - lo), d), np.where(left, c, lo + inv_phi * (hi - lo))
        probe = _profile(logx, y, w, np.exp(np.where(left, c, d)))[2]
        fc, fd = np.where(left, probe, fd), np.where(left, fc, probe)
    alpha = np.exp((lo + hi) / 2)
    e, a_ref, sse = _profile(logx, y, w, alpha)
    converged = (best > 0) & (best < SCAN - 1)
    return Fit(E=e, A=a_ref * n_ref**alpha, alpha=alpha, sse=sse, n_ref=n_ref, converged=converged)


@dataclass(frozen=True)
class LogLinearFit:
    """L = c − b·ln(N / n_ref): the α → 0 limit of E + A·N^(−α) (E + A − Aα·ln N to first order),
    for losses that fall with ln N without slowing down over the sizes at hand."""

    c: np.ndarray
    b: np.ndarray
    n_ref: float

    def predict(self, n: float | np.ndarray) -> np.ndarray:
        return self.c - self.b * np.log(np.asarray(n, dtype=float) / self.n_ref)


def fit_log_linear(n: Sequence[float] | np.ndarray, y: np.ndarray) -> LogLinearFit:
    """Least squares of y = c − b·ln(n / n_ref) along the last axis (any batch shape)."""
    y = np.asarray(y, dtype=float)
    n_arr = np.broadcast_to(np.asarray(n, dtype=float), y.shape)
    n_ref = float(np.exp(np.log(n_arr).mean()))
    x = np.log(n_arr / n_ref)
    xm, ym = x.mean(-1, keepdims=True), y.mean(-1, keepdims=True)
    slope = ((x - xm) * (y - ym)).sum(-1) / ((x - xm) ** 2).sum(-1)
    return LogLinearFit(c=(ym[..., 0] - slope * xm[..., 0]), b=-slope, n_ref=n_ref)


def seed_resamples(n_seeds: int, rng_seed: int = 0) -> np.ndarray:
    """(B, n) seed indices: every ordered resample when n^n <= EXACT_MAX, else RESAMPLES random ones."""
    if n_seeds < 1:
        raise ValueError("a bootstrap over seeds needs at least one seed")
    if n_seeds**n_seeds <= EXACT_MAX:
        return np.array(list(itertools.product(range(n_seeds), repeat=n_seeds)), dtype=int)
    return np.random.default_rng(rng_seed).integers(0, n_seeds, size=(RESAMPLES, n_seeds))


def resample(values: np.ndarray, draws: np.ndarray) -> np.ndarray:
    """Bootstrap copies of `values` (..., n_seeds): the seed axis (last) re-drawn by `draws` (B, n),
    the same draw for every leading index (every rung, arm, LR), each value moved to
    m + sqrt(n/(n−1))·(v − m) around its own cell's mean m. Returns (B, ..., n)."""
    n = values.shape[-1]
    m = values.mean(-1, keepdims=True)
    inflate = math.sqrt(n / (n - 1)) if n > 1 else 1.0
    picked = values[..., draws]  # (..., B, n)
    picked = np.moveaxis(picked, -2, 0)  # (B, ..., n)
    return m + inflate * (picked - m)


def t_multiplier(n_seeds: int) -> float:
    """t(0.975, n − 1): the interval's multiplier of the bootstrap SE (NaN with one seed)."""
    return float(stats.t.ppf(0.5 + LEVEL / 2, n_seeds - 1)) if n_seeds > 1 else math.nan


@dataclass(frozen=True)
class Estimate:
    """A point estimate with its bootstrap-over-seeds interval (estimate ± t·SE)."""

    value: float
    low: float
    high: float
    se: float
    finite_share: float = 1.0  # resamples in which the statistic was defined (a fit converged)

    @property
    def excludes_zero(self) -> bool:
        return math.isfinite(self.low) and (self.low > 0 or self.high < 0)


def bounds(point: np.ndarray, replicates: np.ndarray, n_seeds: int) -> tuple[np.ndarray, np.ndarray]:
    """Vectorised interval: point ± t(0.975, n−1)·SE, SE the standard deviation of the replicates
    along axis 0 (NaN replicates, resamples whose fit did not converge, left out)."""
    reps = np.asarray(replicates, dtype=float)
    ok = np.isfinite(reps)
    count = ok.sum(0)
    mean = np.where(ok, reps, 0.0).sum(0) / np.maximum(count, 1)
    var = np.where(ok, (reps - mean) ** 2, 0.0).sum(0) / np.maximum(count, 1)
    se = np.where(count >= 2, np.sqrt(var), np.nan)
    half = t_multiplier(n_seeds) * se
    return point - half, point + half


def estimate(point: float, replicates: np.ndarray, n_seeds: int, log: bool = False) -> Estimate:
    """estimate ± t(0.975, n−1)·SE over the replicates (`bounds`); `log`: the interval on
    log(value), for a positive scale such as A."""
    reps = np.asarray(replicates, dtype=float).ravel()
    ok = np.isfinite(reps)
    share = float(ok.mean()) if reps.size else 0.0
    if log:
        if not (point > 0 and np.all(reps[ok] > 0)):
            return Estimate(point, math.nan, math.nan, math.nan, share)
        inner = estimate(math.log(point), np.log(reps[ok]), n_seeds)
        return Estimate(point, math.exp(inner.low), math.exp(inner.high), inner.se, share)
    if not math.isfinite(point):
        return Estimate(point, math.nan, math.nan, math.nan, share)
    low, high = bounds(np.array(point), reps, n_seeds)
    se = (float(high) - float(low)) / (2 * t_multiplier(n_seeds)) if n_seeds > 1 else math.nan
    return Estimate(point, float(low), float(high), se, share)
