"""Each arm's loss surface over model sizes × token budgets and its compute-optimal size for a FLOP
budget, from a sweep of a ladder crossed with budgets (gptlab.analysis.budgets.surface_data):

    python -m gptlab.analysis.budgets.surface <sweep dir> [--flops 1e12,1e13]

prints the markdown section that scripts/report.py writes into report.md for such a sweep. A sweep
that cannot give a surface (no ladder or no budgets, fewer than 3 sizes or budgets, cells without
a result) is one line on stderr, exit 2.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from gptlab.analysis.budgets import surface_data as sd
from gptlab.analysis.ladder.report import fmt_estimate
from gptlab.analysis.sweep import tables
from gptlab.analysis.sweep.jobs import Job

NOTE = (
    "A ladder crossed with token budgets: each (size, budget) cell's jobs are that rung's decay branches "
    "of that budget (a branch is the single WSD run of its length), each arm at its own best LR per "
    "cell. N: the ladder's count (non-embedding parameters, the head out); D: the budget's tokens; "
    "C = 6·N·D (Hoffmann et al. 2022, arXiv 2203.15556)."
)
APPROACH3 = (
    "**Approach 3** of Hoffmann et al. (their §3.3): L(N, D) = E + A·N^(−α) + B·D^(−β) fitted to every "
    "per-seed loss of the surface by least squares (theirs: a Huber loss on log L), then at each C the "
    "size that minimises it, N_opt = G·(C/6)^a with a = β/(α+β), G = (αA/(βB))^(1/(α+β)), and "
    "D_opt = C/(6·N_opt). An N_opt or D_opt outside the grid is the law extrapolated, labelled so."
)
APPROACH1 = (
    "**Approach 1** of Hoffmann et al. (their §3.1): at each C, each size's loss at D = C/(6N), linear in "
    "ln D between its budgets (a size whose budgets do not reach D is not compared there), and the "
    "size with the lowest. The optimum is one of the grid's sizes: at the edge of the sizes compared it "
    "is a bound (≤ or ≥ that N), not an estimate. a in N_opt ∝ C^a is fitted through the estimates "
    "alone. Sizes meet at a C only where the budgets' span (D_max/D_min) covers the sizes' (N_max/N_min) "
    "enough to overlap: a grid whose budgets span less than its sizes compares few sizes at any C."
)


def _n(v: float) -> str:
    return f"{v:,.0f}"


def surface_table(grid: sd.Grid, k: int) -> str:
    """Arm k's final val loss per size (rows) and budget (columns): mean [95% CI] over seeds at the
    cell's best LR, and C = 6·N·D."""
    head = ["rung", "N", *[f"{b} steps, D = {_n(d)}" for b, d in zip(grid.steps, grid.d, strict=True)]]
    rows = []
    for i, r in enumerate(grid.rungs):
        row = [r, _n(grid.n[k, i])]
        for b, d in zip(grid.steps, grid.d, strict=True):
            best = grid.cells[(r, b)].arms[k].best
            loss = tables.fmt_interval(best.interval()) if best else tables.EMPTY
            row.append(f"{loss} (C {6 * grid.n[k, i] * d:.3g})")
        rows.append(row)
    return tables.table(head, rows)


def gap_tables(grid: sd.Grid) -> list[str]:
    """Each arm − the baseline per (size, budget), each at its best LR there: the ablation's
    interval and verdict (paired t over seeds; gptlab.analysis.sweep.arms)."""
    first = grid.cells[(grid.rungs[0], grid.steps[0])]
    lines = []
    for j, comp in enumerate(first.comparisons()):
        head = ["rung", *[f"{b} steps" for b in grid.steps]]
        rows = [
            [r, *[f"{tables.fmt_interval(c.diff)}: {c.verdict}" for c in
                  (grid.cells[(r, b)].comparisons()[j] for b in grid.steps)]]
            for r in grid.rungs
        ]  # fmt: skip
        lines += ["", f"### `{comp.arm}` − `{comp.baseline}` per cell", "", tables.table(head, rows)]
    return lines


def arm_lines(grid: sd.Grid, arm: sd.ArmSurface, k: int) -> list[str]:
    """One arm's surface table, its fitted law, and both approaches' optima."""
    lines = [
        f"### `{arm.arm}`",
        "",
        "#### Loss surface (final val loss, best LR per cell)",
        "",
        surface_table(grid, k),
    ]
    lines += ["", "#### Approach 3: the fitted law", ""]
    p = arm.params
    head = ["E", "A", "α", "B", "β", "a (N_opt ∝ C^a)", "fit"]
    row = [
        fmt_estimate(p["E"]), fmt_estimate(p["A"], sci=True), fmt_estimate(p["α"], 3),
        fmt_estimate(p["B"], sci=True), fmt_estimate(p["β"], 3), fmt_estimate(p["a"], 3), arm.status,
    ]  # fmt: skip
    lines.append(tables.table(head, [row]))
    if arm.optima:
        head = ["C (FLOPs)", "N_opt", "D_opt (tokens)", "loss there", "where"]
        rows = [
            [f"{o.flops:.3g}", fmt_estimate(o.n, sci=True), fmt_estimate(o.d, sci=True), fmt_estimate(o.loss),
             o.label]
            for o in arm.optima
        ]  # fmt: skip
        lines += ["", "#### Approach 3: compute-optimal size", "", tables.table(head, rows)]
    lines += ["", "#### Approach 1: the envelope", ""]
    head = ["C (FLOPs)", "sizes compared", "N_opt", "lowest loss", "resamples agreeing"]
    rows = []
    for e in arm.envelope:
        pt = e.point
        if pt.best < 0:
            rows.append([f"{pt.flops:.3g}", "none", "no size reaches this C", tables.EMPTY, tables.EMPTY])
            continue
        n_opt = _n(grid.n[k, pt.best])
        what = {
            "": f"{n_opt} (estimate)",
            "≤": f"≤ {n_opt} (bound: the smallest compared)",
            "≥": f"≥ {n_opt} (bound: the largest compared)",
            "only size": f"{n_opt} (the only size at this C: no comparison)",
        }
        agree = tables.EMPTY if e.agree is None else f"{e.agree:.0%}"
        rows.append([f"{pt.flops:.3g}", str(len(pt.compared)), what[pt.bound], f"{pt.loss:.4f}", agree])
    lines.append(tables.table(head, rows))
    if arm.envelope_a is not None:
        lines += ["", f"a (N_opt ∝ C^a, through the estimates): {fmt_estimate(arm.envelope_a, 3)}"]
    if arm.envelope_note:
        lines += ["", arm.envelope_note + "."]
    return lines


def surface_lines(grid: sd.Grid, flops: list[float] | None = None) -> list[str]:
    """The section: the note, each arm's surface and optima."""
    flops, arms = sd.analyse(grid, flops)
    seeds = len(grid.seeds)
    lines = [
        "## Loss surface and compute-optimal size",
        "",
        NOTE,
        "",
        f"Sizes: {', '.join(grid.rungs)}; budgets in steps: {', '.join(map(str, grid.steps))} "
        f"({grid.per_step:,} tokens a step); {seeds} seed(s). Intervals: {sd.interval_kind(grid)}.",
        "",
        APPROACH3,
        "",
        APPROACH1,
    ]
    if grid.incomplete:
        lines += ["", f"Incomplete cells (a planned job without a result; a best LR may come from a partial "
                      f"curve): {'; '.join(grid.incomplete)}."]  # fmt: skip
    for k, arm in enumerate(arms):
        lines += ["", *arm_lines(grid, arm, k)]
    return lines + gap_tables(grid)


def surface_section(jobs: list[Job], record: dict[str, Any], root: Path) -> list[str]:
    """The report's section for the sweep in `root` (its jobs and record as the report read them),
    or one line saying why there is none."""
    try:
        return surface_lines(sd.grid_of(jobs, record, str(root)))
    except sd.SurfaceError as err:
        return ["## Loss surface and compute-optimal size", "", f"**No surface**: {err}."]


def _flops(text: str) -> list[float]:
    try:
        values = [float(v) for v in text.split(",")]
    except ValueError:
        raise sd.SurfaceError(
            f"--flops={text!r} is not accepted; give FLOP counts > 0, comma-separated"
        ) from None
    if not values or not all(v > 0 for v in values):
        raise sd.SurfaceError(f"--flops={text!r} is not accepted; give FLOP counts > 0, comma-separated")
    return values


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").strip().splitlines()[0])
    parser.add_argument("sweep", type=Path)
    parser.add_argument(
        "--flops", default=None, help="FLOP budgets C, comma-separated (default: 5 over the grid)"
    )
    args = parser.parse_args(argv)
    try:
        flops = _flops(args.flops) if args.flops is not None else None
        lines = surface_lines(sd.read_grid(args.sweep), flops)
    except sd.SurfaceError as err:
        print(f"error: {' '.join(str(err).split())}", file=sys.stderr)
        return 2
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
