"""The ladder's results as plain values: the per-rung table, the fits, the extrapolated gap and its
verdict, the trend over the rungs and the held-out forecasts (`gptlab.analysis.ladder.analyse` computes them,
`gptlab.analysis.ladder.report` writes them). Kept apart so the writer and the fits share the
shapes without importing each other."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gptlab.analysis.ladder import powerlaw


class LadderError(ValueError):
    """The ladder cannot be fitted as planned (too few sizes, sizes not increasing in N): one line."""


@dataclass
class RungArm:
    """One arm at one rung: its model's size and the jobs' losses by LR and seed."""

    n: float | None  # non-embedding parameters
    flops_per_token: float | None
    tokens: float | None
    best_lr: float | None = None
    best_at_edge: bool = False
    points: dict[str, float] = field(default_factory=dict)  # seed → final val loss at the best LR

    @property
    def flops(self) -> float | None:
        if self.flops_per_token is None or self.tokens is None:
            return None
        return self.flops_per_token * self.tokens


@dataclass
class ArmFit:
    arm: str
    against: str  # "N" or "C"
    E: powerlaw.Estimate | None
    A: powerlaw.Estimate | None
    alpha: powerlaw.Estimate | None
    status: str  # "converged", or why there is no number
    slope: powerlaw.Estimate | None = None  # b of the log-linear limit L = c − b·ln N, when fitted
    curve: Any = None  # the point estimate's curve, n (array) → loss (for the figure)


@dataclass
class Extrapolation:
    arm: str
    baseline: str
    n_max: float
    n_ext: float
    gap_last: powerlaw.Estimate | None
    gap_ext: powerlaw.Estimate | None
    change: powerlaw.Estimate | None
    crossover: powerlaw.Estimate | None
    verdict: str


@dataclass
class LadderResult:
    key: str  # the rung key (model.n_embd)
    rungs: list[str]  # rung values in ladder order
    arms: list[str]
    baseline: str
    seeds: list[str]
    table: dict[tuple[str, str], RungArm]  # (rung, arm) →
    gaps: dict[tuple[str, str], powerlaw.Estimate | None]  # (rung, arm) → arm − baseline at best LRs
    fits: list[ArmFit]
    extrapolations: list[Extrapolation]
    used: list[str]  # rungs in the fit (every arm has a complete LR there)
    note: str  # why no fit, when there is none
    incomplete: list[str]  # rungs where a planned job has no result
    refused: str = ""  # the ladder as planned cannot be fitted (bad input: the CLI exits 2)
    trends: list[Trend] = field(default_factory=list)  # the measured gap against ln N, no curve
    held_out: list[HeldOut] = field(default_factory=list)  # forecasts of rungs left out of the fit
    curves: dict[str, Any] = field(default_factory=dict)  # arm → its Model against N (None: no curve)


@dataclass
class Forecast:
    """One quantity at a held-out rung: the fit's forecast and the measurement, both with the
    bootstrap-over-seeds interval; `covered`: the forecast's interval holds the measured value."""

    what: str  # an arm, or "arm − baseline"
    kind: str  # the curve it came from ("power law", "log-linear limit"), or why there is none
    forecast: powerlaw.Estimate | None
    measured: powerlaw.Estimate | None

    @property
    def error(self) -> float | None:
        """measured − forecast."""
        if self.forecast is None or self.measured is None:
            return None
        return self.measured.value - self.forecast.value

    @property
    def covered(self) -> bool | None:
        f, m = self.forecast, self.measured
        if f is None or m is None or not math.isfinite(f.low):
            return None
        return f.low <= m.value <= f.high


@dataclass
class HeldOut:
    """A rung left out of the fit (the largest; with 5 or more rungs also the second largest, fitted
    on every other rung), its forecasts against what it measured."""

    rung: str
    n: float
    fitted_on: list[str]
    rows: list[Forecast]


@dataclass
class Trend:
    """How the measured gap (arm − baseline, each at its best LR, per rung) moves across the rungs:
    the least-squares slope of the gap on log10 N, i.e. its change per 10× N, with the bootstrap
    over seeds; no curve per arm is needed (it holds when the losses fit no law)."""

    arm: str
    baseline: str
    per_decade: powerlaw.Estimate
    verdict: str  # widens / narrows over the rungs (the slope's CI on the gap's side of 0 / the
    # other, the side read from the largest rung's gap), or no trend resolved


@dataclass
class Model:
    """One arm's fitted curve, point estimate and resamples: `point(n)` → (1,), `boot(n)` → (B,)
    (n broadcast in front: a (G, 1) grid gives (G, 1) and (G, B)); `valid`: (B,) resamples whose
    fit is usable; `kind`: "power law" or "log-linear limit"; None when the arm has no usable fit."""

    point: Any
    boot: Any
    valid: np.ndarray
    kind: str
