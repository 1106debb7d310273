"""The report of a sweep over token budgets (hydra.sweeper.budgets, gptlab.ablation.budgets): per arm,
the final val loss against tokens with a 95% t interval at every budget, the gap to the baseline and
its verdict per budget, a figure, the compute the branches saved against separate runs, and per
arm L(D) = E + B·D^(−β) with its gap extrapolated (gptlab.analysis.budgets.fit).

Each budget is a cell of the ablation machinery (gptlab.analysis.sweep.arms) whose jobs are that budget's
decay branches (a branch of B steps is the single WSD run of B steps, docs/optim.md): the trunks hold
their LR to the end, so their final loss is no budget's result and they are left out. Each arm is
read at its own best LR *per budget* (the best LR may move with the budget), with arms' definitions
of a result, a best LR, an interval and a verdict.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import yaml

from gptlab.ablation.budgets import STEPS_KEY, compute_saved, is_branch
from gptlab.analysis.budgets.fit import DataLaw, fit_budgets
from gptlab.analysis.ladder.fit import EXTRAPOLATE
from gptlab.analysis.ladder.report import fmt_estimate
from gptlab.analysis.stats import LEVEL
from gptlab.analysis.sweep import tables
from gptlab.analysis.sweep.arms import Cell, arrange
from gptlab.analysis.sweep.jobs import Job

NOTE = (
    "Each budget's cells are its decay branches: the branch of B steps from the trunk's step B − d, "
    "decaying over its last d, is the single WSD run of B steps (docs/optim.md). The trunks (LR held to "
    "the end) are no budget's result and are left out. Each arm at its own best LR at that budget "
    "(lowest mean over the LRs where every seed has a result); mean over seeds with a 95% t interval; "
    "gap and verdict as in an ablation (paired t over seeds, better/worse only when every planned job "
    "of both arms at that budget has a result)."
)


def tokens_per_step(jobs: list[Job]) -> int | None:
    """batch × block × accumulation from the first job whose composed config says (per device)."""
    for job in jobs:
        if job.path is None:
            continue
        try:
            cfg = yaml.safe_load((job.path / ".hydra" / "config.yaml").read_text())
            return (
                int(cfg["data"]["batch_size"])
                * int(cfg["model"]["block_size"])
                * int(cfg["trainer"]["accumulate_grad_batches"])
            )
        except (OSError, KeyError, TypeError, ValueError, yaml.YAMLError):
            continue
    return None


def budget_cells(jobs: list[Job], record: dict[str, Any], sensitivity: str = "init") -> list[Cell]:
    """One cell per budget (trainer.max_steps of its branches), arms in grid order."""
    branches = [j for j in jobs if is_branch(j.values)]
    cells = {STEPS_KEY: [str(b) for b, _, _ in record["budgets"]]}
    return arrange(branches, {**record, "cells": cells}, sensitivity)


def saved_line(record: dict[str, Any], per_step: int | None) -> str:
    """The compute the branches saved, in steps (and tokens when known)."""
    separate, run = compute_saved(record["jobs"])
    saved = separate - run

    def amount(steps: int) -> str:
        return f"{steps:,} steps" + (f" ({steps * per_step:,} tokens)" if per_step else "")

    share = f", {saved / separate:.0%} of separate runs" if separate else ""
    return (
        f"Compute saved: {amount(saved)}{share}. Separate runs of every budget would train "
        f"Σ(at + d) = {amount(separate)}; the trunks and the decays train {amount(run)}."
    )


LAW_NOTE = (
    "Per arm, L(D) = E + B·D^(−β) by least squares on the per-seed final val losses at the arm's best "
    "LR per budget, D the budget's tokens (steps when the tokens a step are unknown): the ladder's fit "
    "(gptlab.analysis.ladder.powerlaw) with D in place of N. Every fitted number: estimate [95% CI] by "
    "the bootstrap over seeds (one draw of seeds for every budget and arm, the best LR picked again in "
    "each resample; estimate ± t(n−1)·SE). E is the loss at infinite data; an arm whose β runs to 0 "
    "(no slowing over the budgets) has no identifiable E and is not fitted. The gap of two arms' laws at "
    f"the largest budget and at {EXTRAPOLATE:g}× its tokens, only where both fit; the verdict is the "
    "ladder's (flips, widens, narrows, holds, else inconclusive), with D for N."
)


def law_lines(law: DataLaw, incomplete: list[str]) -> list[str]:
    """The fit table and the extrapolated gaps, or why there are none."""
    lines = ["### L(D) = E + B·D^(−β) per arm", "", LAW_NOTE, ""]
    if law.note:
        return [*lines, f"**No fit**: {law.note}."]
    head = ["arm", "E [95% CI]", "B [95% CI]", "β [95% CI]", "fit"]
    rows = [
        [f"`{f.arm}`", fmt_estimate(f.E), fmt_estimate(f.A, sci=True), fmt_estimate(f.alpha, 3), f.status]
        for f in law.fits
    ]  # fmt: skip
    sizes = ", ".join(f"{d:,.0f}" for d in law.sizes)
    lines += [f"D in {law.unit}: {sizes}.", "", tables.table(head, rows)]
    head = ["arm", "baseline", "gap at the largest budget (fit)", f"gap at {EXTRAPOLATE:g}× D", "change",
            f"crossover D ({law.unit})", "verdict"]  # fmt: skip
    rows = []
    for x in law.extrapolations:
        cross = "none in range" if x.crossover is None else fmt_estimate(x.crossover, sci=True)
        verdict = x.verdict
        if incomplete:
            budgets = ", ".join(incomplete)
            verdict = f"incomplete (budgets {budgets}: planned jobs without a result): {verdict}"
        rows.append([
            f"`{x.arm}`", f"`{x.baseline}`", fmt_estimate(x.gap_last),
            fmt_estimate(x.gap_ext) + f" at D={x.n_ext:,.0f}", fmt_estimate(x.change), cross, verdict,
        ])  # fmt: skip
    return [*lines, "", "#### The gap extrapolated", "", tables.table(head, rows)]


def loss_table(cells: list[Cell], per_step: int | None) -> str:
    """Per budget: its tokens, each arm's loss at its best LR (and that LR), each gap and verdict."""
    arms = [a.arm for a in cells[0].arms] if cells else []
    pct = f"{LEVEL:.0%}"
    head = ["budget (steps)", "tokens", *[f"`{a}` loss [{pct} CI] (best LR)" for a in arms]]
    others = [c.arm for c in cells[0].comparisons()] if cells else []
    head += [f"`{a}` − `{cells[0].baseline}` [{pct} CI]: verdict" for a in others]
    rows = []
    for cell in cells:
        steps = int(cell.values[STEPS_KEY])
        row = [str(steps), f"{steps * per_step:,}" if per_step else tables.EMPTY]
        for arm in cell.arms:
            best = arm.best
            row.append(
                tables.fmt_interval(best.interval()) + f" ({tables.best_lr_text(arm)})" if best else "-"
            )
        row += [f"{tables.fmt_interval(c.diff)}: {c.verdict}" for c in cell.comparisons()]
        rows.append(row)
    return tables.table(head, rows)


def budget_figure(cells: list[Cell], per_step: int | None, experiment: str, out: Path) -> Path:
    """Final val loss against tokens (log x), one line per arm at its best LR per budget, the band
    its 95% t interval over seeds."""
    from gptlab.figures import band_panels

    scale = per_step or 1
    series: dict[str, tuple[list, list, list, list, list]] = {}
    for cell in cells:
        x = int(cell.values[STEPS_KEY]) * scale
        for arm in cell.arms:
            s = series.setdefault(arm.arm, ([], [], [], [], []))
            best = arm.best
            if best is None or best.interval() is None:
                continue
            i = best.interval()
            finite = math.isfinite(i.low) and math.isfinite(i.high)  # one seed: no band
            s[0].append(x)
            s[1].append(i.mean)
            s[2].append(i.low if finite else i.mean)
            s[3].append(i.high if finite else i.mean)
    return band_panels(
        {"best LR per budget": series},
        out / f"{experiment}_val_loss_vs_tokens.png",
        "tokens (log)" if per_step else "steps (log)",
        f"final val loss (mean; band: {LEVEL:.0%} t interval)",
        title=f"{experiment}: final validation loss against tokens",
        ncols=1,
    )


def budget_section(
    jobs: list[Job], record: dict[str, Any], out: Path, figures: bool, sensitivity: str = "init"
) -> list[str]:
    """The budgets' markdown: compute saved, loss against tokens, the figure, the L(D) fits, per-budget
    tables."""
    cells = budget_cells(jobs, record, sensitivity)
    per_step = tokens_per_step(jobs)
    plan = ", ".join(f"{b} (branch at {at}, decay {d})" for b, at, d in record["budgets"])
    lines = [
        "## Budgets",
        "",
        f"Arms `{record['arm']}`: {', '.join(f'`{a}`' for a in record['arms'])}; baseline "
        f"`{record['baseline']}`. Budgets in steps: {plan}; "
        + (f"{per_step:,} tokens a step." if per_step else "tokens a step unknown (no job config)."),
        "",
        NOTE,
        "",
        saved_line(record, per_step),
        "",
        "### Final val loss against tokens",
        "",
        loss_table(cells, per_step),
    ]
    if figures:
        named = (j.values.get("experiment") for j in jobs if j.values.get("experiment"))
        path = budget_figure(cells, per_step, str(next(named, "budgets")), out)
        lines += ["", f"![final val loss against tokens]({path.relative_to(out.parent)})"]
    incomplete = [c.values[STEPS_KEY] for c in cells if any(a.gaps() for a in c.arms)]
    law = fit_budgets(cells, list(record["seeds"]), per_step, str(record["baseline"]))
    lines += ["", *law_lines(law, incomplete)]
    for cell in cells:
        lines += ["", f"### Budget {cell.values[STEPS_KEY]} steps", "", tables.arm_table(cell)]
        lines += ["", "#### Final val loss by LR, mean [95% CI] over seeds", "", tables.lr_table(cell)]
        lines += ["", "#### Against the baseline", "", tables.comparison_table(cell)]
    return lines
