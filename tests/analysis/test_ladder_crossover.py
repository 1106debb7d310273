"""The ladder's crossover and its size check against oracles outside the module (issue 37, §6).

Two power-law curves in N whose crossing is known in closed form: the baseline
L_b = E + A·N^(−α) and an arm L_a = E + δ + 0.8·A·N^(−α), below the baseline at small N (a
smaller A) and above it at large N (δ > 0), equal where δ = 0.2·A·N^(−α), i.e. at
N* = (0.2·A / δ)^(1/α). scipy's brentq finds each root numerically too. The resamples move δ, so
each has its own N*; the interval is on log N (a size is positive), the bootstrap's
estimate ± t(0.975, n−1)·SE with SE the replicates' standard deviation (gptlab.analysis.powerlaw),
computed here with numpy and scipy.stats.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import optimize, stats

from gptlab.analysis.ladder import check_sizes
from gptlab.analysis.ladder_fit import extrapolate
from gptlab.analysis.ladder_types import LadderError, Model

E, ALPHA, SEEDS = 1.8, 0.3, 3
A = 10 * 1e6**ALPHA
SIZES = np.array([1e6, 3e6, 1e7])  # the baseline's rungs: the search runs from 1e6 to 1000 × 1e7
DELTA = 0.3
BOOT = DELTA * np.linspace(0.8, 1.2, 27)


def curve(e: np.ndarray, a: float) -> object:
    return lambda x: e + a * np.asarray(x, dtype=float) ** -ALPHA


def models() -> tuple[Model, Model]:
    arm = Model(
        curve(np.array([E + DELTA]), 0.8 * A), curve(E + BOOT, 0.8 * A), np.ones(27, bool), "power law"
    )
    base = Model(curve(np.array([E]), A), curve(np.full(27, E), A), np.ones(27, bool), "power law")
    return arm, base


def root(delta: float) -> float:
    gap = lambda n: (E + delta + 0.8 * A * n**-ALPHA) - (E + A * n**-ALPHA)  # noqa: E731
    return float(optimize.brentq(gap, SIZES[0], 1000 * SIZES[-1], rtol=1e-14))


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
    from gptlab.analysis.ladder_fit import trend
    from gptlab.analysis.powerlaw import Estimate

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
