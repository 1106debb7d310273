"""Which figures a sweep gets: final loss against LR per arm (ablations), and per-job pictures.

figures.py draws; this module decides what goes into each picture. Per-job pictures (loss curves,
gradient heat maps and depth profiles) are drawn only for sweeps small enough to read them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from gptlab.analysis.sweep.arms import DIVERGED, RESULT, Cell, outcome
from gptlab.analysis.sweep.jobs import Job
from gptlab.analysis.sweep.tables import SEED_KEYS, label

_BLOCK_COL = re.compile(r"^grad_norm/block_(\d+)$")
PER_JOB_LIMIT = 16  # more jobs than this: the per-job panels would be unreadable
Made = list[tuple[str, Path]]


def lr_figure(cells: Sequence[Cell], experiment: str, out: Path) -> Path:
    """Final val loss against LR (log x), one line per arm: the mean over seeds with results and a
    min–max band over those seeds; an LR where a seed diverged gets a red cross. One panel per cell."""
    from gptlab.figures import band_panels

    panels = {}
    for cell in cells:
        series = {}
        for arm in cell.arms:
            x, mean, low, high, bad = [], [], [], [], []
            for p in arm.points:
                vals = list(p.results().values())
                if vals:
                    x.append(p.lr)
                    mean.append(sum(vals) / len(vals))
                    low.append(min(vals))
                    high.append(max(vals))
                if any(outcome(j) == DIVERGED for j in p.jobs.values()):
                    bad.append(p.lr)
            series[arm.arm] = (x, mean, low, high, bad)
        panels[cell.title] = series
    return band_panels(
        panels,
        out / f"{experiment}_val_loss_vs_lr.png",
        "peak learning rate (log)",
        "final val loss (mean; band: min–max over seeds)",
        title=f"{experiment}: final validation loss against LR",
    )


def grad_matrix(job: Job) -> tuple[list[list[float]], list[int]]:
    """Block × step gradient norms from the CSV log (rows: block 0 = input side)."""
    cols = sorted((int(m.group(1)), name) for name in job.log if (m := _BLOCK_COL.match(name)))
    if not cols:
        return [], []
    steps = sorted({s for _, name in cols for s, _ in job.log[name]})
    matrix = []
    for _, name in cols:
        by_step = dict(job.log[name])
        matrix.append([by_step.get(s, float("nan")) for s in steps])
    return matrix, steps


def _num(value: str) -> float | None:
    try:
        return float(value)
    except ValueError:
        return None


def _numeric_keys(jobs: Sequence[Job], keys: Sequence[str]) -> list[str]:
    """Varying keys whose values are all numbers and make a sensible x axis (not the seed)."""
    out = []
    for k in keys:
        vals = {j.values.get(k) for j in jobs}
        if (
            k not in SEED_KEYS
            and None not in vals
            and all(_num(v) is not None for v in vals)
            and len(vals) >= 3
        ):  # type: ignore[arg-type]
            out.append(k)
    return out


def per_job_figures(jobs: Sequence[Job], keys: Sequence[str], out: Path) -> Made:
    """Loss curves, gradient heat maps and depth profiles, one line or panel per job."""
    from gptlab.figures import curve_panels, heatmap_grid

    logged = [j for j in jobs if j.log]
    if not logged or len(logged) > PER_JOB_LIMIT:
        return []
    facet, rest = (keys[0], list(keys[1:])) if len(keys) >= 2 and len(logged) > 8 else (None, list(keys))

    def panel_of(j: Job) -> str:
        return f"{facet}={j.values.get(facet, '?')}" if facet else "all jobs"

    made: Made = []
    train: dict[str, dict] = {}
    val: dict[str, dict] = {}
    for j in logged:
        tr, va = j.log.get("train/loss", []), j.log.get("val/loss", [])
        train.setdefault(panel_of(j), {})[label(j, rest)] = ([s for s, _ in tr], [v for _, v in tr])
        val.setdefault(panel_of(j), {})[label(j, rest)] = ([s for s, _ in va], [v for _, v in va])
    path = curve_panels(
        train, out / "loss_curves.png", "step", "train loss (lines), val loss (dots)",
        title="loss curves", markers=False, dots=val,
    )  # fmt: skip
    made.append(("Loss curves (train: lines; validation: dots)", path))
    heat = [(label(j, keys), *grad_matrix(j)) for j in logged]
    if any(m for _, m, _ in heat):
        path = heatmap_grid(
            heat,
            out / "grad_norm_heatmaps.png",
            title="gradient norm per block (layer × step), shared log scale",
        )
        made.append(("Gradient norm per block, layer × step, one panel per job", path))
        profile: dict[str, dict] = {}
        for j in logged:
            matrix, _ = grad_matrix(j)
            if not matrix:
                continue
            for where, col in (("first logged step", 0), ("last logged step", -1)):
                title = f"{panel_of(j)} — {where}" if facet else where
                profile.setdefault(title, {})[label(j, rest)] = (
                    list(range(len(matrix))),
                    [r[col] for r in matrix],
                )
        path = curve_panels(
            profile, out / "grad_norm_depth_profile.png", "block index (input → output)", "gradient L2 norm",
            title="gradient norm by depth", logy=True, ncols=2,
        )  # fmt: skip
        made.append(("Depth profile of gradient norms at the first logged step and at the end", path))
    return made


def loss_against_keys(jobs: Sequence[Job], keys: Sequence[str], out: Path) -> Made:
    """Final val loss against each numeric swept key (one line per setting of the others)."""
    from gptlab.figures import curve_panels

    made: Made = []
    for x in _numeric_keys(jobs, keys):
        others = [k for k in keys if k != x and k not in SEED_KEYS]
        panel_key = others[-1] if len(others) >= 2 else None
        line_keys = others[:-1] if panel_key else others
        panels: dict[str, dict[str, tuple[list[float], list[float]]]] = {}
        for j in jobs:
            xv, y = _num(j.values.get(x, "")), j.metric("final_val_loss")
            if outcome(j) not in (RESULT, DIVERGED) or xv is None or y is None:
                continue  # no final loss: nothing to plot
            panel = f"{panel_key}={j.values.get(panel_key, '?')}" if panel_key else "all jobs"
            xs, ys = panels.setdefault(panel, {}).setdefault(
                label(j, line_keys) if line_keys else "all jobs", ([], [])
            )
            xs.append(xv)
            ys.append(y)
        for series in panels.values():
            for name, (xs, ys) in list(series.items()):
                order = sorted(range(len(xs)), key=xs.__getitem__)
                series[name] = ([xs[i] for i in order], [ys[i] for i in order])
        if not panels:
            continue
        values = sorted(v for v in (_num(j.values.get(x, "")) for j in jobs) if v is not None)
        short = re.split(r"[./]", x)[-1]
        path = curve_panels(
            panels, out / f"val_loss_vs_{short}.png", x, "final val loss",
            title=f"final validation loss against {x}", logx=values[0] > 0 and values[-1] / values[0] >= 20,
            markers=True,
        )  # fmt: skip
        made.append((f"Final validation loss against {x}", path))
    return made
