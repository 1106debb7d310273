"""The power-law fit and its bootstrap over seeds, against oracles that share none of its code:
known E, A, α of synthetic losses; scipy's curve_fit on the same points; Student's t interval of a
paired difference (scipy.stats); and the coverage of the 95% intervals over repeated trials."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import optimize, stats

from gptlab.analysis.ladder import powerlaw as pl

N = np.array([7e3, 5.5e4, 1.87e5, 4.4e5])  # the sizes of ladder_ffn's rungs, roughly


def _law(n, e, a, alpha):
    return e + a * n ** (-alpha)


def test_fit_recovers_a_known_power_law_exactly_without_noise() -> None:
    truth = [(1.8, 0.5 * 7e3**0.3, 0.3), (0.9, 40.0, 0.6), (2.5, 3.0, 0.1)]
    y = np.stack([_law(N, *t) for t in truth])
    fit = pl.fit_power_law(N, y)
    for i, (e, a, alpha) in enumerate(truth):
        assert fit.converged[i]
        assert fit.E[i] == pytest.approx(e, rel=1e-5)
        assert fit.A[i] == pytest.approx(a, rel=1e-4)
        assert fit.alpha[i] == pytest.approx(alpha, rel=1e-5)
        assert fit.predict(10 * N[-1])[i] == pytest.approx(_law(10 * N[-1], e, a, alpha), rel=1e-6)


def test_fit_with_noise_is_scipys_least_squares_minimum_and_near_the_truth() -> None:
    rng = np.random.default_rng(3)
    e, a, alpha = 1.8, 0.5 * 7e3**0.3, 0.3
    n = np.repeat(N, 5)  # 5 seeds per rung
    y = _law(n, e, a, alpha) + rng.normal(0, 0.003, size=(4, n.size))
    fit = pl.fit_power_law(n, y)
    for i in range(4):
        ref, _ = optimize.curve_fit(_law, n, y[i], p0=[e, a, alpha], maxfev=20000)
        sse_ref = float(((y[i] - _law(n, *ref)) ** 2).sum())
        assert fit.sse[i] <= sse_ref * (1 + 1e-7)  # the same minimum (or a lower one)
        assert fit.alpha[i] == pytest.approx(ref[2], rel=1e-3)
        assert fit.E[i] == pytest.approx(ref[0], abs=1e-3)
        assert abs(fit.alpha[i] - alpha) < 0.05 and abs(fit.E[i] - e) < 0.05


def test_no_power_law_is_labelled_not_converged() -> None:
    flat_then_drop = np.array([2.0, 2.0, 2.0, 1.0])  # wants a step: α runs to the bound
    rising = np.array([1.0, 1.2, 1.4, 1.6])
    fit = pl.fit_power_law(N, np.stack([flat_then_drop, rising]))
    assert not fit.converged[0]
    assert not (fit.converged[1] and fit.A[1] > 0)


def test_the_interval_of_a_paired_difference_is_students_t() -> None:
    """Per rung, the gap is a mean over seeds of (arm − baseline): with every resample enumerated,
    the inflated bootstrap's estimate ± t·SE is the paired t interval exactly."""
    base = np.array([2.10, 2.31, 2.05, 2.24])
    arm = np.array([2.02, 2.27, 2.01, 2.13])
    values = np.stack([base, arm])  # (arms, seeds)
    draws = pl.seed_resamples(4)
    assert draws.shape == (4**4, 4)
    boot = pl.resample(values, draws)  # (B, arms, seeds)
    reps = (boot[:, 1] - boot[:, 0]).mean(-1)
    got = pl.estimate(float((arm - base).mean()), reps, 4)
    d = arm - base
    low, high = stats.t.interval(0.95, len(d) - 1, loc=d.mean(), scale=stats.sem(d))
    assert (got.low, got.high) == pytest.approx((low, high), rel=1e-9)


def test_a_resample_draws_seeds_not_runs() -> None:
    """Seed s moves every rung and both arms together (its data order is theirs): losses that differ
    between rungs only by a per-rung constant give a rung-to-rung difference with no spread at all;
    resampling each (rung, arm) run on its own would give one."""
    seed_effect = np.array([0.00, 0.05, -0.03])
    values = np.array([2.5, 2.2, 2.0])[:, None] + seed_effect[None, :]  # (rungs, seeds)
    boot = pl.resample(values, pl.seed_resamples(3))
    diff = boot[:, 2].mean(-1) - boot[:, 0].mean(-1)
    assert np.ptp(diff) == pytest.approx(0.0, abs=1e-12)
    assert np.ptp(boot[:, 0].mean(-1)) > 0.01  # a rung's own mean does vary


def _coverage(trials: int, seed: int) -> dict[str, float]:
    """Share of `trials` synthetic ladders (two arms, 4 rungs, 3 seeds; noise per run plus a seed
    effect shared by every rung and arm of that seed) whose 95% intervals hold the truth."""
    rng = np.random.default_rng(seed)
    r, s = len(N), 3
    truth = {"E": 1.8, "alpha": 0.3}
    base = _law(N, 1.8, 0.5 * N[0] ** 0.3, 0.3)
    arm = _law(N, 1.75, 0.5 * N[0] ** 0.35, 0.35)
    n_ext = 10 * N[-1]
    gap_true = _law(n_ext, 1.75, 0.5 * N[0] ** 0.35, 0.35) - _law(n_ext, 1.8, 0.5 * N[0] ** 0.3, 0.3)
    shared = rng.normal(0, 0.01, size=(trials, 1, 1, s))
    values = np.stack([base, arm])[None, :, :, None] + shared + rng.normal(0, 0.01, size=(trials, 2, r, s))
    n = np.repeat(N, s)

    def fit(v: np.ndarray) -> pl.Fit:
        return pl.fit_power_law(n, v.reshape(*v.shape[:-2], r * s))

    point = fit(values)  # (T, arms)
    boot = fit(pl.resample(values, pl.seed_resamples(s)))  # (B, T, arms)
    ok = boot.converged & (boot.A > 0)
    out = {}
    for name, value in truth.items():
        low, high = pl.bounds(
            getattr(point, name)[:, 0], np.where(ok[..., 0], getattr(boot, name)[..., 0], np.nan), s
        )
        out[name] = float(((low <= value) & (value <= high)).mean())
    gap_p, gap_b = point.predict(n_ext), boot.predict(n_ext)
    low, high = pl.bounds(
        gap_p[:, 1] - gap_p[:, 0], np.where(ok.all(-1), gap_b[..., 1] - gap_b[..., 0], np.nan), s
    )
    out["gap at 10× N"] = float(((low <= gap_true) & (gap_true <= high)).mean())
    return out


def test_95_percent_intervals_cover_the_truth_in_about_95_percent_of_trials() -> None:
    """200 trials: a coverage estimate has a binomial sd of sqrt(.95·.05/200) = 1.5 points, so a
    correct 95% interval lands in [0.90, 0.99] (−3.2 to +2.6 sd) but for a ~1-in-1000 draw; the
    RNG is seeded, so the test is deterministic. At 1,500 trials the same set-up measured 95.8%
    (E), 95.8% (α), 94.7% (gap); these 200 give 93.5%, 95.5%, 93.5%. Measured breakages: 1.96
    instead of t(2) covers 76–83%; each run re-drawn on its own instead of one draw of seeds
    covers 99.5–100% (the gap's pairing is lost), so the upper bound matters too."""
    coverage = _coverage(trials=200, seed=5)
    for name, share in coverage.items():
        assert 0.90 <= share <= 0.99, (name, coverage)
