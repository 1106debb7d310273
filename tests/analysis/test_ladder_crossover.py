"""The ladder's crossover and its size check against oracles outside the module (issue 37, §6).

Two power-law curves in N whose crossing is known in closed form: the baseline
L_b = E + A·N^(−α) and an arm L_a = E + δ + 0.8·A·N^(−α), below the baseline at small N (a
smaller A) and above it at large N (δ > 0), equal where δ = 0.2·A·N^(−α), i.e. at
N* = (0.2·A / δ)^(1/α). scipy's brentq finds each root numerically too. The resamples move δ, so
each has its own N*; the interval is on log N (a size is positive), the bootstrap's
estimate ± t(0.975, n−1)·SE with SE the replicates' standard deviation (gptlab.analysis.ladder.powerlaw),
computed here with numpy and scipy.stats.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import optimize, stats

from gptlab.analysis.ladder.analyse import check_sizes
from gptlab.analysis.ladder.fit import extrapolate
from gptlab.analysis.ladder.records import LadderError, Model

E, ALPHA, SEEDS = 1.8, 0.3, 3
A = 10 * 1e6**ALPHA
SIZES = np.array([1e6, 3e6, 1e7])  # the baseline's rungs: the search runs from 1e6 to 1000 × 1e7
DELTA = 0.3
BOOT = DELTA * np.linspace(0.8, 1.2, 27)


def curve(e: np.ndarray, a: float) -> object:
    return lambda x: e + a * np.asarray(x, dtype=float) ** -ALPHA


def models(delta: float = DELTA, boot: np.ndarray = BOOT) -> tuple[Model, Model]:
    arm = Model(
        curve(np.array([E + delta]), 0.8 * A), curve(E + boot, 0.8 * A), np.ones(27, bool), "power law"
    )
    base = Model(curve(np.array([E]), A), curve(np.full(27, E), A), np.ones(27, bool), "power law")
    return arm, base


def root(delta: float, lo: float = SIZES[0]) -> float:
    gap = lambda n: (E + delta + 0.8 * A * n**-ALPHA) - (E + A * n**-ALPHA)  # noqa: E731
    return float(optimize.brentq(gap, lo, 1000 * SIZES[-1], rtol=1e-14))


def test_the_crossover_is_where_the_curves_cross_with_its_interval_on_log_n() -> None:
    arm, base = models()
    ext = extrapolate("swiglu", "gelu", arm, base, SIZES, SEEDS)
    closed = (0.2 * A / DELTA) ** (1 / ALPHA)
    assert root(DELTA) == pytest.approx(closed, rel=1e-10)  # the oracle agrees with itself
    assert SIZES[-1] < closed < 1000 * SIZES[-1]
    assert ext.crossover is not None
    assert ext.crossover.value == pytest.approx(closed, rel=2e-5)  # interpolated on the search grid
    logs = np.log([root(d) for d in BOOT])
    half = float(stats.t.ppf(0.975, SEEDS - 1)) * float(np.std(logs))
    assert (ext.crossover.low, ext.crossover.high) == pytest.approx(
        (math.exp(math.log(closed) - half), math.exp(math.log(closed) + half)), rel=1e-4
    )


def test_a_crossover_between_the_rungs_is_found_and_one_below_the_smallest_is_not() -> None:
    """The search runs over [smallest rung, 1000 × largest] (docs/ablations.md), not only beyond the
    ladder: curves that cross at N* = 3e6, between the rungs 1e6 and 1e7 (δ = 0.2·A·N*^(−α)), have
    that crossover, every resample's N* inside the ladder too; curves that cross at 5e5, below the
    smallest rung, have none in range (the arm stays above the baseline over the whole range)."""
    inside = 0.2 * A * 3e6**-ALPHA
    boot = inside * np.linspace(0.95, 1.05, 27)
    assert SIZES[0] < root(boot[-1]) < root(boot[0]) < SIZES[-1]  # the premise: every N* between the rungs
    ext = extrapolate("swiglu", "gelu", *models(inside, boot), SIZES, SEEDS)
    assert ext.crossover is not None
    assert root(inside) == pytest.approx(3e6, rel=1e-10)
    assert ext.crossover.value == pytest.approx(3e6, rel=2e-5)
    logs = np.log([root(d) for d in boot])
    half = float(stats.t.ppf(0.975, SEEDS - 1)) * float(np.std(logs))
    assert (ext.crossover.low, ext.crossover.high) == pytest.approx(
        (3e6 * math.exp(-half), 3e6 * math.exp(half)), rel=1e-4
    )
    below = 0.2 * A * 5e5**-ALPHA
    assert root(below, lo=1e5) == pytest.approx(5e5, rel=1e-10)  # it crosses, but below the range
    ext = extrapolate("swiglu", "gelu", *models(below, below * np.linspace(0.99, 1.01, 27)), SIZES, SEEDS)
    assert ext.crossover is None


@pytest.mark.parametrize("sizes", [[1e6, 1e6, 2e6], [1e6, 2e6, 1.5e6]])
def test_rungs_must_grow_strictly_in_n(sizes: list[float]) -> None:
    rungs = ["24", "48", "72"]
    with pytest.raises(LadderError, match="ladder sizes must increase in N"):
        check_sizes(rungs, dict(zip(rungs, sizes, strict=True)), "gelu")
    check_sizes(rungs, dict(zip(rungs, sorted({*sizes, 3e6})[:3], strict=True)), "gelu")


def test_the_trend_over_the_rungs_is_the_least_squares_slope_and_says_when_the_last_gap_is_unresolved() -> (
    None
):
    """The gap's slope on log10 N is numpy's polyfit line, its interval t·SD of the resamples'
    slopes; a trend whose largest rung's own gap interval holds 0 says so."""
    from gptlab.analysis.ladder.fit import trend
    from gptlab.analysis.ladder.powerlaw import Estimate

    log_n = np.log10(SIZES)
    point = np.array([-0.02, -0.05, -0.09])
    rng = np.random.default_rng(0)
    boot = point + rng.normal(0.0, 0.002, (27, 3))
    slope = np.polyfit(log_n, point, 1)[0]
    slopes = np.array([np.polyfit(log_n, b, 1)[0] for b in boot])
    half = float(stats.t.ppf(0.975, SEEDS - 1)) * float(np.std(slopes))
    for last, resolved in (
        (Estimate(-0.09, -0.12, -0.06, 0.01), True),
        (Estimate(-0.09, -0.2, 0.02, 0.05), False),
    ):
        assert (last.low > 0 or last.high < 0) is resolved
        t = trend("swiglu", "gelu", log_n, point, boot, last, SEEDS)
        assert t.per_decade.value == pytest.approx(slope, rel=1e-9)
        assert (t.per_decade.low, t.per_decade.high) == pytest.approx((slope - half, slope + half), rel=1e-9)
        assert t.verdict.startswith("widens over the rungs")  # the gap grows on its own (negative) side
        assert t.verdict.endswith("(the largest rung's own gap is not resolved)") is not resolved
