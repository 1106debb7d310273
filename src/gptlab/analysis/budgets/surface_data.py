"""A sweep of model sizes × token budgets (a ladder, `hydra.sweeper.ladder`, crossed with
`hydra.sweeper.budgets`: a WSD trunk per (rung, arm, LR, seed) and a decay branch per budget) read
into each arm's loss surface, and per arm the compute-optimal size for a FLOP budget by Hoffmann et
al. 2022's Approaches 1 (`envelope`) and 3 (`surface_fit`), with intervals.

Each (rung, budget) is a cell of the ablation machinery whose jobs are that rung's branches of that
budget; each arm is read at its own best LR per cell (arms' rules). N is the ladder's count (each
job's non-embedding parameters, `gptlab.analysis.ladder.analyse.model_size`), D a budget's tokens,
C = 6·N·D (Hoffmann et al.'s FLOP count; the ladder's C fit also counts attention, 12·L·T·d).

Intervals: with two seeds or more, the ladder's bootstrap over seeds (one draw of seeds for every
cell and arm, the best LR picked again in each resample; estimate ± t(n−1)·SE). With one seed there
is nothing to resample but the fit's residuals: Approach 3 gets a residual bootstrap (percentile
interval, `RESIDUAL_DRAWS` draws), Approach 1 (no model) none.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from gptlab.ablation.budgets import STEPS_KEY, is_branch
from gptlab.ablation.sweep_dir import read_record
from gptlab.analysis.budgets import envelope as env
from gptlab.analysis.budgets.report import tokens_per_step
from gptlab.analysis.budgets.surface_fit import ALPHA_MIN, PARAMS, SurfaceFit, fit_surface, residual_resamples
from gptlab.analysis.ladder import powerlaw
from gptlab.analysis.ladder.analyse import cell_values, model_size
from gptlab.analysis.ladder.fit import best_points
from gptlab.analysis.sweep.arms import Cell, arrange
from gptlab.analysis.sweep.jobs import Job, read_sweep

MIN_SIZES = MIN_BUDGETS = 3  # each exponent of E + A·N^(−α) + B·D^(−β) needs three values of its variable
RESIDUAL_DRAWS = 500
FLOPS_POINTS = 5  # default FLOP budgets: log-spaced over the grid's 6·N·D
ONE_SEED = "one seed: bootstrap over the fit's residuals (scaled by sqrt(P/(P − 5))), 95% percentile interval"
SEEDS = "bootstrap over seeds: estimate ± t(n−1)·SE"


E_NEGATIVE = (
    "E < 0: the law through these losses runs below zero loss (exponents near 0: they fall with ln N and "
    "ln D without slowing), so it has no loss floor and its optimum is none; no law, no optimum"
)


class SurfaceError(ValueError):
    """The sweep cannot give a surface (no such sweep, too few sizes or budgets, jobs without a
    result): one line naming what is missing."""


@dataclass
class Grid:
    """A sizes × budgets sweep's results. Cells are (rung, budget); `point` (R, Bu, K, S) the per-seed
    final val losses at each (cell, arm)'s best LR; `boot` (B, R, Bu, K, S) the same in each seed
    resample (None with one seed)."""

    arms: list[str]
    rungs: list[str]
    steps: list[int]
    per_step: int
    seeds: list[str]
    n: np.ndarray  # (K, R) the ladder's N per arm and rung
    cells: dict[tuple[str, int], Cell]
    point: np.ndarray
    boot: np.ndarray | None
    incomplete: list[str] = field(default_factory=list)  # cells with a planned job without a result

    @property
    def d(self) -> np.ndarray:
        return np.array(self.steps, dtype=float) * self.per_step


@dataclass
class Optimum:
    """The compute-optimal size at one FLOP count by Approach 3, or why there is none."""

    flops: float
    n: powerlaw.Estimate | None
    d: powerlaw.Estimate | None
    loss: powerlaw.Estimate | None
    label: str  # "within the grid", or where it was extrapolated


@dataclass
class EnvelopeRow:
    point: env.EnvelopePoint
    agree: float | None  # share of seed resamples whose envelope picks the same size (None: one seed)


@dataclass
class ArmSurface:
    arm: str
    params: dict[str, powerlaw.Estimate | None]  # E, A, α, B, β, a
    status: str  # "converged", or why no law
    optima: list[Optimum]
    envelope: list[EnvelopeRow]
    envelope_a: powerlaw.Estimate | None
    envelope_note: str


def read_grid(root: Path) -> Grid:
    """The sweep in `root` as a Grid; SurfaceError when it cannot give one."""
    record = read_record(root)
    return grid_of(read_sweep(root), record, str(root))


def grid_of(jobs: list[Job], record: dict[str, Any] | None, where: str) -> Grid:
    """The Grid of a sweep's jobs and record (ablation.json); SurfaceError says what is missing."""
    if record is None or not record.get("ladder_key") or not record.get("budgets"):
        raise SurfaceError(
            f"{where} holds no sweep of sizes × budgets (its ablation.json needs both hydra.sweeper.ladder "
            "and hydra.sweeper.budgets; e.g. python train.py -m experiment=surface_ffn)"
        )
    key = str(record["ladder_key"])
    rungs = [str(v) for v in record["cells"][key]]
    steps = [int(b) for b, _, _ in record["budgets"]]
    if len(rungs) < MIN_SIZES:
        raise SurfaceError(
            f"a surface needs at least {MIN_SIZES} sizes (hydra.sweeper.ladder.widths); "
            f"{where} has {len(rungs)}"
        )
    if len(steps) < MIN_BUDGETS:
        raise SurfaceError(
            f"a surface needs at least {MIN_BUDGETS} budgets (hydra.sweeper.budgets); "
            f"{where} has {len(steps)}"
        )
    per_step = tokens_per_step(jobs)
    if per_step is None:
        raise SurfaceError(
            f"{where}: no job's .hydra/config.yaml says the tokens a step (C = 6·N·D needs them)"
        )
    branches = [j for j in jobs if is_branch(j.values)]
    cells_in_order = arrange(
        branches, {**record, "cells": {key: rungs, STEPS_KEY: [str(s) for s in steps]}}, "init"
    )
    cells = {(c.values[key], int(c.values[STEPS_KEY])): c for c in cells_in_order}
    arms, seeds = list(record["arms"]), list(record["seeds"])
    empty = [
        f"{a.arm} at {key}={r}, {b} steps" for (r, b), c in cells.items() for a in c.arms if a.best is None
    ]
    if empty:
        more = f" and {len(empty) - 3} more" if len(empty) > 3 else ""
        raise SurfaceError(
            f"{where}: no complete LR (every seed with a result) for {'; '.join(empty[:3])}{more}: jobs "
            "missing (the sweep unfinished: re-run its command with the same hydra.sweep.dir), failed or "
            "diverged at every LR (scripts/status.py names them)"
        )
    n = np.full((len(arms), len(rungs)), np.nan)
    for i, r in enumerate(rungs):
        for k, a in enumerate(cells[(r, steps[0])].arms):
            jobs_of = [j for p in a.points for j in p.jobs.values() if j.path is not None]
            size = next((s for s in map(model_size, jobs_of) if s), None)
            if size is None:
                raise SurfaceError(
                    f"{where}: the model size of {a.arm} at {key}={r} cannot be read from its jobs"
                )
            n[k, i] = size[0]
    if not (np.diff(n, axis=1) > 0).all():
        raise SurfaceError(f"{where}: the sizes must increase in N along {key}={rungs}; got N = {n.tolist()}")
    vals = cell_values(cells_in_order, seeds)  # (R·Bu, K, LR, S), rung-major as arranged
    complete = np.isfinite(vals).all(-1)
    shape = (len(rungs), len(steps), len(arms), len(seeds))
    point = best_points(vals[None], complete)[0].reshape(shape)
    boot = None
    if len(seeds) > 1:
        draws = powerlaw.seed_resamples(len(seeds))
        boot = best_points(powerlaw.resample(np.nan_to_num(vals), draws), complete).reshape(-1, *shape)
    incomplete = [f"{key}={r}, {b} steps" for (r, b), c in cells.items() if any(a.gaps() for a in c.arms)]
    return Grid(arms, rungs, steps, per_step, seeds, n, cells, point, boot, incomplete)


def _interval(point: float, reps: np.ndarray, n_seeds: int, log: bool = False) -> powerlaw.Estimate:
    """The seeds' t interval (n_seeds >= 2), else the residual bootstrap's percentile interval."""
    if n_seeds > 1:
        return powerlaw.estimate(point, reps, n_seeds, log=log)
    ok = reps[np.isfinite(reps)]
    share = float(ok.size / reps.size) if reps.size else 0.0
    if not math.isfinite(point) or ok.size < 2:
        return powerlaw.Estimate(point, math.nan, math.nan, math.nan, share)
    low, high = np.percentile(ok, [2.5, 97.5])
    return powerlaw.Estimate(point, float(low), float(high), math.nan, share)


def _fit_arm(grid: Grid, k: int) -> tuple[SurfaceFit, SurfaceFit, np.ndarray, np.ndarray]:
    """Approach 3 for arm k: the point fit on every (rung, budget, seed) loss and its resamples."""
    r, bu, s = len(grid.rungs), len(grid.steps), len(grid.seeds)
    n = np.repeat(np.repeat(grid.n[k][:, None], bu, 1)[..., None], s, -1).ravel()
    d = np.repeat(np.tile(grid.d, (r, 1))[..., None], s, -1).ravel()
    y = grid.point[:, :, k].ravel()
    point = fit_surface(n, d, y)
    if grid.boot is not None:
        reps = grid.boot[:, :, :, k].reshape(len(grid.boot), -1)
    else:
        reps = residual_resamples(n, d, y, point, RESIDUAL_DRAWS)
    return point, fit_surface(n, d, reps), n, d


def _label(n_opt: float, d_opt: float, grid: Grid, k: int) -> str:
    words = []
    if n_opt > grid.n[k].max():
        words.append("N above the largest size")
    elif n_opt < grid.n[k].min():
        words.append("N below the smallest size")
    if d_opt > grid.d.max():
        words.append("D above the largest budget")
    elif d_opt < grid.d.min():
        words.append("D below the smallest budget")
    return (
        "within the grid"
        if not words
        else "extrapolated (" + "; ".join(words) + "): the law's, not the grid's"
    )


def approach3(grid: Grid, k: int, flops: list[float]) -> tuple[dict, str, list[Optimum]]:
    """Arm k's fitted law (E, A, α, B, β, a with intervals), its status, and N_opt at each C."""
    point, boot, _, _ = _fit_arm(grid, k)
    n_seeds = len(grid.seeds)
    names = {"E": "E", "A": "A", "α": "alpha", "B": "B", "β": "beta"}
    if not point.converged:
        edges = []
        for name, var, value, ok in (("α", "N", point.alpha, point.alpha_converged),
                                     ("β", "D", point.beta, point.beta_converged)):  # fmt: skip
            if not ok:
                low = float(value) < 2 * ALPHA_MIN
                edges.append(
                    f"{name} = {float(value):.3g} at the {'lower' if low else 'upper'} edge of its search ("
                    + (
                        f"the loss falls with ln {var} without slowing: no floor"
                        if low
                        else f"a step in {var}"
                    )
                    + ")"
                )
        return dict.fromkeys([*names, "a"]), f"not converged: {'; '.join(edges)}; no law, no optimum", []
    if not (point.A > 0 and point.B > 0):
        which = "A" if not point.A > 0 else "B"
        why = f"{which} <= 0: the loss does not fall with {'N' if which == 'A' else 'D'}; no interior optimum"
        return dict.fromkeys([*names, "a"]), why, []
    if not point.E >= 0:  # a cross-entropy is never below 0: such an E is no floor, its optimum none
        return dict.fromkeys([*names, "a"]), E_NEGATIVE, []
    ok = boot.converged & (boot.A > 0) & (boot.B > 0) & (boot.E >= 0)

    def est(value: float, reps: np.ndarray, log: bool = False) -> powerlaw.Estimate:
        return _interval(value, np.where(ok, reps, np.nan), n_seeds, log)

    params = {
        v: est(float(getattr(point, f)), getattr(boot, f), log=v in ("A", "B")) for v, f in names.items()
    }
    params["a"] = est(float(point.exponent_a()), boot.exponent_a())
    status = "converged" if ok.all() else f"converged ({ok.mean():.0%} of resamples)"
    optima = []
    for c in flops:
        n_p, n_b = float(point.optimal_n(c)), boot.optimal_n(c)
        d_p, d_b = c / (6 * n_p), c / (6 * n_b)
        l_p, l_b = float(point.predict(n_p, d_p)), boot.predict(n_b, d_b)
        optima.append(Optimum(
            c, est(n_p, n_b, log=True), est(d_p, d_b, log=True), est(l_p, l_b), _label(n_p, d_p, grid, k),
        ))  # fmt: skip
    return params, status, optima


def approach1(
    grid: Grid, k: int, flops: list[float]
) -> tuple[list[EnvelopeRow], powerlaw.Estimate | None, str]:
    """Arm k's envelope at each C, the share of seed resamples that agree, and a's fit."""
    sizes, d = grid.n[k], grid.d
    points = env.envelope(sizes, d, grid.point[:, :, k].mean(-1), np.array(flops))
    fitted = env.fit_exponent(points, sizes)
    agree: list[float | None] = [None] * len(points)
    a_est, note = None, ""
    if grid.boot is not None:
        reps = [env.envelope(sizes, d, b[:, :, k].mean(-1), np.array(flops)) for b in grid.boot]
        agree = [float(np.mean([rep[i].best == p.best for rep in reps])) for i, p in enumerate(points)]
        if fitted is not None:
            a_reps = np.array([(f[0] if (f := env.fit_exponent(rep, sizes)) else np.nan) for rep in reps])
            a_est = powerlaw.estimate(fitted[0], a_reps, len(grid.seeds))
    elif fitted is not None:
        a_est = powerlaw.Estimate(fitted[0], math.nan, math.nan, math.nan)
        note = "one seed: no interval (Approach 1 has no model whose residuals could be resampled)"
    if fitted is None:
        visited = len({p.best for p in points if p.best >= 0 and not p.bound})
        note = (
            "a not fitted: the envelope's optimum is an estimate (not at the edge of the sizes compared) "
            f"at {visited} size(s); N_opt ∝ C^a needs at least {env.MIN_VISITED}"
        )
    return [EnvelopeRow(p, a) for p, a in zip(points, agree, strict=True)], a_est, note


def analyse(grid: Grid, flops: list[float] | None = None) -> tuple[list[float], list[ArmSurface]]:
    """Both approaches for every arm at `flops` (default: FLOPS_POINTS log-spaced over the grid)."""
    if flops is None:
        flops = [float(c) for c in env.flops_grid(grid.n.min(0), grid.d, FLOPS_POINTS)]
    if len(grid.rungs) * len(grid.steps) * len(grid.seeds) <= PARAMS:
        raise SurfaceError(f"a surface fit has {PARAMS} parameters and needs more points than that")
    out = []
    for k, arm in enumerate(grid.arms):
        params, status, optima = approach3(grid, k, flops)
        rows, a_est, note = approach1(grid, k, flops)
        out.append(ArmSurface(arm, params, status, optima, rows, a_est, note))
    return flops, out


def interval_kind(grid: Grid) -> str:
    return SEEDS if len(grid.seeds) > 1 else ONE_SEED
