"""Hoffmann et al. 2022's Approach 1 (arXiv 2203.15556, §3.1) on a grid of sizes × token budgets:
the envelope of the minimum loss over sizes at each FLOP count C = 6·N·D, the size that attains
it, and N_opt ∝ C^a fitted through those sizes.

Hoffmann et al. read each size's loss at every FLOP count off the (smoothed) training curves of
runs of several lengths. A budget sweep has something cleaner at fewer points: each budget's loss
is a finished run decayed to that budget (a branch is the single WSD run of its length). Between
two budgets a size's loss is interpolated linearly in ln D; outside its budgets a size has no
loss at that C and is not compared there (no extrapolation). The optimum is then one of the grid's
sizes: when it is the smallest or the largest size compared at that C, the true optimum may lie
beyond it, so it is a *bound* (≤ or ≥ that size), never an estimate. a is fitted (least squares of
ln N_opt on ln C) only through estimates, and only when they visit at least two sizes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

MIN_VISITED = 2  # distinct interior optimal sizes the fit of a needs


@dataclass(frozen=True)
class EnvelopePoint:
    """The envelope at one FLOP count: the lowest loss over the sizes compared there, its size's
    index, and whether that size is a bound (at the edge of the sizes compared) or an estimate."""

    flops: float
    loss: float  # NaN: no size has a loss at this C
    best: int  # index into the sizes; −1 when none is compared
    compared: tuple[int, ...]  # sizes with a loss at this C
    bound: str  # "" (an estimate), "≤" (the smallest compared), "≥" (the largest), or "only size"


def loss_at(tokens: np.ndarray, losses: np.ndarray, d: float) -> float:
    """One size's loss at `d` tokens, linear in ln D between its budgets; NaN outside them."""
    logd = np.log(tokens)
    x = math.log(d)
    if x < logd[0] - 1e-12 or x > logd[-1] + 1e-12:
        return math.nan
    return float(np.interp(x, logd, losses))


def envelope(
    sizes: np.ndarray, tokens: np.ndarray, losses: np.ndarray, flops: np.ndarray
) -> list[EnvelopePoint]:
    """The envelope at each of `flops`: sizes (R,) increasing, tokens (Bu,) increasing, losses
    (R, Bu) (the mean over seeds at each cell's best LR)."""
    out = []
    for c in flops:
        per = np.array([loss_at(tokens, losses[r], c / (6.0 * sizes[r])) for r in range(len(sizes))])
        compared = tuple(int(r) for r in np.nonzero(np.isfinite(per))[0])
        if not compared:
            out.append(EnvelopePoint(float(c), math.nan, -1, (), ""))
            continue
        best = compared[int(np.argmin(per[list(compared)]))]
        if len(compared) == 1:
            bound = "only size"
        elif best == compared[0]:
            bound = "≤"
        elif best == compared[-1]:
            bound = "≥"
        else:
            bound = ""
        out.append(EnvelopePoint(float(c), float(per[best]), best, compared, bound))
    return out


def fit_exponent(points: list[EnvelopePoint], sizes: np.ndarray) -> tuple[float, float] | None:
    """(a, ln G) of N_opt = G·C^a by least squares through the envelope's estimates (bounds left
    out); None when they visit fewer than MIN_VISITED sizes."""
    est = [p for p in points if p.best >= 0 and not p.bound]
    if len({p.best for p in est}) < MIN_VISITED:
        return None
    x = np.log([p.flops for p in est])
    y = np.log([sizes[p.best] for p in est])
    a, lng = np.polyfit(x, y, 1)
    return float(a), float(lng)


def flops_grid(sizes: np.ndarray, tokens: np.ndarray, count: int) -> np.ndarray:
    """`count` log-spaced FLOP counts from the grid's smallest 6·N·D to its largest."""
    lo, hi = 6.0 * sizes.min() * tokens.min(), 6.0 * sizes.max() * tokens.max()
    return np.exp(np.linspace(math.log(lo), math.log(hi), count))
