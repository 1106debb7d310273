"""The report's statistics against formulas written here: t intervals from a printed t table, Welch's
degrees of freedom, the paired test, the verdict, and Wortsman et al.'s LR sensitivity by hand."""

from __future__ import annotations

import math
import statistics

import pytest

from gptlab.analysis.stats import (
    lr_sensitivity,
    mean_interval,
    paired_difference,
    t_quantile,
    verdict,
    welch_difference,
)
from gptlab.analysis.sweep.arms import ArmSummary, LRPoint, compare
from gptlab.analysis.sweep.jobs import Job

# two-sided 95% critical values of Student's t (any printed table; e.g. NIST/SEMATECH 1.3.6.7.2)
T975 = {
    1: 12.706,
    2: 4.303,
    3: 3.182,
    4: 2.776,
    5: 2.571,
    6: 2.447,
    9: 2.262,
    10: 2.228,
    20: 2.086,
    30: 2.042,
}


@pytest.mark.parametrize("df", sorted(T975))
def test_t_quantile_matches_the_table(df: int) -> None:
    assert t_quantile(0.975, df) == pytest.approx(T975[df], abs=6e-4)


def test_mean_interval_is_mean_plus_minus_t_times_se() -> None:
    seeds = [2.41, 2.38, 2.45]
    mean = sum(seeds) / 3
    sd = math.sqrt(sum((x - mean) ** 2 for x in seeds) / 2)
    half = 4.303 * sd / math.sqrt(3)
    i = mean_interval(seeds)
    assert i.mean == pytest.approx(mean)
    assert (i.low, i.high) == (pytest.approx(mean - half, abs=1e-4), pytest.approx(mean + half, abs=1e-4))
    assert i.df == 2


def test_paired_uses_the_per_seed_differences() -> None:
    a, b = [2.30, 2.35, 2.41, 2.28], [2.33, 2.39, 2.44, 2.30]  # a is lower in every seed, by ~0.03
    d = [x - y for x, y in zip(a, b, strict=True)]
    md, sd = sum(d) / 4, statistics.stdev(d)
    i = paired_difference(a, b)
    assert i.test == "paired t" and i.df == 3
    assert i.high == pytest.approx(md + 3.182 * sd / 2, abs=1e-4)
    assert verdict(i) == "better"  # the seed-to-seed spread cancels in the pairs
    assert verdict(welch_difference(a, b)) == "within noise"  # unpaired, the same numbers say nothing


def test_welch_degrees_of_freedom() -> None:
    a, b = [1.0, 1.2, 1.1], [1.5, 1.9, 1.3, 1.7, 1.6]
    va, vb = statistics.variance(a) / 3, statistics.variance(b) / 5
    df = (va + vb) ** 2 / (va**2 / 2 + vb**2 / 4)
    i = welch_difference(a, b)
    assert i.df == pytest.approx(df)
    se = math.sqrt(va + vb)
    assert i.half_width / se == pytest.approx(t_quantile(0.975, df))
    assert 5 < df < 6 and T975[6] < i.half_width / se < T975[5]  # bracketed by the table's rows


def test_verdict_flips_when_the_interval_excludes_zero() -> None:
    base = [2.50, 2.52, 2.49]
    noise = [0.004, -0.006, 0.003]
    for shift, expected in ((0.0, "within noise"), (-0.05, "better"), (0.05, "worse")):
        arm = [b + shift + n for b, n in zip(base, noise, strict=True)]
        assert verdict(paired_difference(arm, base)) == expected, shift


def test_lr_sensitivity_by_hand() -> None:
    init = math.log(256)  # 5.5452
    # grid of 4 LRs: 2.6, 2.4 (best), 2.9, diverged → counted at ln 256
    expected = ((2.6 - 2.4) + 0 + (2.9 - 2.4) + (init - 2.4)) / 4
    assert lr_sensitivity([2.6, 2.4, 2.9, None], init) == pytest.approx(expected)
    assert lr_sensitivity([2.6, 2.4, 2.9, math.nan], init) == pytest.approx(expected)
    # a finished run worse than init is clipped to it as well
    assert lr_sensitivity([2.4, 7.0], init) == pytest.approx((init - 2.4) / 2)
    assert lr_sensitivity([2.4, 2.4], init) == 0.0


def _job(loss: float | None, status: str = "finished") -> Job:
    metrics = {"status": status, "final_val_loss": loss, "diverged": status == "diverged"}
    return Job(name="x", path=None, overrides=[], metrics=metrics, status=status)


def _arm(name: str, table: dict[float, dict[str, float | None]]) -> ArmSummary:
    points = []
    for lr, seeds in table.items():
        p = LRPoint(lr)
        for s, v in seeds.items():
            p.jobs[s] = _job(v) if v is not None else _job(None, "diverged")
        points.append(p)
    return ArmSummary(name, points, ["1", "2", "3"], math.log(256))


def test_best_lr_skips_a_diverged_lr_and_comparison_pairs_seeds() -> None:
    base = _arm("base", {1e-3: {"1": 2.60, "2": 2.62, "3": 2.61}, 3e-3: {"1": 2.50, "2": 2.53, "3": 2.51}})
    # 1e-2 has the lowest mean of its finished seeds, but seed 3 diverged there: not eligible
    arm = _arm("arm", {1e-3: {"1": 2.45, "2": 2.48, "3": 2.46}, 1e-2: {"1": 2.20, "2": 2.21, "3": None}})
    assert arm.best is not None and arm.best.lr == 1e-3
    assert base.best is not None and base.best.lr == 3e-3
    c = compare(arm, base)
    assert c.diff is not None and c.diff.test == "paired t"
    d = [2.45 - 2.50, 2.48 - 2.53, 2.46 - 2.51]
    assert c.diff.mean == pytest.approx(sum(d) / 3)
    assert verdict(c.diff) == "better"  # the interval alone would say so, but arm's best LR was
    # chosen from a partial curve (1e-2 might be better with seed 3): no better/worse (issue 25)
    assert c.verdict == "inconclusive (partial curve): arm lr 0.01 seed 3 diverged"
    assert (c.planned, c.n_gaps) == (12, 1)
    # per-seed sensitivity: seed 3 diverged at 1e-2 and counts at ln 256 there
    per_seed = arm.sensitivity_per_seed()
    assert per_seed["3"] == pytest.approx(((2.46 - 2.46) + (math.log(256) - 2.46)) / 2)
    assert per_seed["1"] == pytest.approx((2.45 - 2.20) / 2)


def test_across_cells_pairs_each_arm_with_itself_in_the_reference_cell() -> None:
    """The depth check: global at n_layer=8 against global at n_layer=2, each at its own best LR."""
    from gptlab.analysis.sweep.arms import Cell, across_cells

    shallow = {1e-3: {"1": 2.10, "2": 2.12, "3": 2.11}, 3e-3: {"1": 2.03, "2": 2.05, "3": 2.04}}
    deep = {1e-3: {"1": 1.98, "2": 2.02, "3": 1.99}, 3e-3: {"1": 2.20, "2": 2.31, "3": None}}
    none_shallow = {1e-3: {"1": 2.2, "2": 2.2, "3": 2.3}, 3e-3: {"1": 2.1, "2": 2.2, "3": 2.2}}
    none_deep = {1e-3: {"1": 2.3, "2": 2.2, "3": 2.2}, 3e-3: {"1": 2.2, "2": 2.1, "3": 2.2}}
    cells = [
        Cell({"model.n_layer": "2"}, [_arm("none", none_shallow), _arm("global", shallow)], "none"),
        Cell({"model.n_layer": "8"}, [_arm("none", none_deep), _arm("global", deep)], "none"),
    ]
    out = across_cells(cells, {"model.n_layer": ["2", "8"]})
    pairs = [(x.comparison.arm, x.value, x.reference) for x in out]
    assert pairs == [("none", "8", "2"), ("global", "8", "2")]
    g = out[1].comparison
    d = [1.98 - 2.03, 2.02 - 2.05, 1.99 - 2.04]  # deep at 1e-3 (3e-3 has a divergence) − shallow at 3e-3
    md, sd = sum(d) / 3, statistics.stdev(d)
    assert g.diff is not None and g.diff.test == "paired t"
    assert g.diff.mean == pytest.approx(md)
    assert g.diff.high == pytest.approx(md + 4.303 * sd / math.sqrt(3), abs=1e-4)
    assert verdict(g.diff) == "better"  # the interval; but deep 3e-3 seed 3 diverged: partial curve
    assert g.verdict == "inconclusive (partial curve): global at model.n_layer=8 lr 0.003 seed 3 diverged"
    assert out[0].comparison.verdict == "within noise"
