"""The report's markdown tables: one row per job, and the ablation's arm, LR and comparison tables."""

from __future__ import annotations

import itertools
import math
import re
import statistics
from collections.abc import Sequence

from gptlab.analysis.stats import LEVEL, Interval
from gptlab.analysis.sweep.arms import DIVERGED, ArmSummary, Cell, CellComparison, Comparison, LRPoint
from gptlab.analysis.sweep.jobs import Job

EMPTY = "—"
SEED_KEYS = ("seed",)


def fmt(value: float | None, digits: int = 4) -> str:
    if value is None:
        return EMPTY
    if not math.isfinite(value):
        return str(value)
    return f"{value:.{digits}f}"


def fmt_interval(i: Interval | None, digits: int = 4) -> str:
    """`mean [low, high]`, or the mean alone (one seed: no interval); "(clipped)" when the t
    interval was cut to the quantity's range."""
    if i is None:
        return EMPTY
    if not math.isfinite(i.low):
        return f"{i.mean:.{digits}f} (n={i.n}, no CI)"
    text = f"{i.mean:.{digits}f} [{i.low:.{digits}f}, {i.high:.{digits}f}]"
    return text + " (clipped)" if i.clipped else text


def row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(str(c).replace("|", "/") for c in cells) + " |"


def table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    return "\n".join([row(head), "|" + "---|" * len(head), *(row(r) for r in rows)])


def label(job: Job, keys: Sequence[str]) -> str:
    """A short name from the job's varying overrides: the last part of each key, e.g. n_layer=12."""
    vals = job.values
    parts = [f"{re.split(r'[./]', k)[-1]}={vals.get(k, '?')}" for k in keys]
    return ", ".join(parts) or job.name


def job_table(jobs: Sequence[Job], keys: Sequence[str]) -> str:
    """One row per job (planned-but-not-started jobs included), with its status spelled out."""
    head = [
        "job", "overrides", "params", "steps", "best val loss", "final val loss",
        "final train loss", "max grad norm", "tokens/s", "diverged", "status",
    ]  # fmt: skip
    rows = []
    for j in jobs:
        overrides = ", ".join(f"{k}={j.values[k]}" for k in keys if k in j.values) or EMPTY
        m = j.metrics or {}
        params = m.get("num_params")
        steps: str = str(m["steps"]) if "steps" in m else EMPTY
        if "steps" not in m and (last := j.last_step()) is not None:
            steps = f"{last + 1} (csv)"  # the CSV's step is 0-based: a row at step 11 is 12 steps done
        tps = j.metric("tokens_per_sec")
        # the report's reading (a non-finite loss or a non-finite-gradient stop is diverged even
        # where metrics.json's own flag says false), so this column never contradicts the status
        diverged = True if j.status == "diverged" else m.get("diverged")
        status = j.status if not j.problems else f"{j.status}: {'; '.join(j.problems)}"
        rows.append([
            j.name, f"`{overrides}`", f"{params:,}" if isinstance(params, int) else EMPTY, steps,
            fmt(j.metric("best_val_loss")), fmt(j.metric("final_val_loss")),
            fmt(j.metric("final_train_loss")), fmt(j.metric("max_grad_norm"), 3),
            f"{tps:.0f}" if tps is not None and math.isfinite(tps) else EMPTY,
            EMPTY if diverged is None else ("yes" if diverged else "no"), status,
        ])  # fmt: skip
    return table(head, rows)


def seed_table(jobs: Sequence[Job], keys: Sequence[str]) -> str | None:
    """Mean ± sd over seeds of each variant's best val and final train loss (None: no seed sweep)."""
    if not any(k in SEED_KEYS for k in keys):
        return None
    others = [k for k in keys if k not in SEED_KEYS]
    groups: dict[str, list[Job]] = {}
    for j in jobs:
        groups.setdefault(label(j, others), []).append(j)

    def stat(js: list[Job], key: str) -> str:
        vals = [v for v in (j.metric(key) for j in js) if v is not None and math.isfinite(v)]
        if len(vals) < 2:
            return fmt(vals[0]) if vals else EMPTY
        return f"{statistics.fmean(vals):.4f} ± {statistics.stdev(vals):.4f}"

    rows = [
        [f"`{name}`", f"{sum(1 for j in js if j.metric('best_val_loss') is not None)}/{len(js)}",
         stat(js, "best_val_loss"), stat(js, "final_train_loss")]
        for name, js in groups.items()
    ]  # fmt: skip
    head = ["variant", "seeds with metrics", "best val loss (mean ± sd)", "final train loss (mean ± sd)"]
    return table(head, rows)


def _point_cell(p: LRPoint, n_seeds: int) -> str:
    """One (arm, LR) cell: the mean over seeds with its interval, and what did not give a result."""
    text = fmt_interval(p.interval())
    notes = []
    if p.count(DIVERGED):
        notes.append(f"diverged {p.count(DIVERGED)}/{n_seeds}")
    missing = n_seeds - len(p.results()) - p.count(DIVERGED)
    if missing:
        notes.append(f"no result {missing}/{n_seeds}")
    return text if not notes else f"{text} ({', '.join(notes)})" if p.results() else ", ".join(notes)


def lr_table(cell: Cell) -> str:
    """Final val loss by arm (rows) and LR (columns), mean [95% CI] over seeds."""
    lrs = [p.lr for p in cell.arms[0].points]
    head = ["arm", *[f"lr {lr:.3g}" for lr in lrs]]
    rows = [[f"`{a.arm}`", *[_point_cell(p, len(a.seeds)) for p in a.points]] for a in cell.arms]
    return table(head, rows)


def best_lr_text(a: ArmSummary) -> str:
    """The arm's best LR, marked "(grid edge)" and "(partial curve)" where they apply."""
    best = a.best
    lr = EMPTY if best is None else f"{best.lr:.3g}" + (" (grid edge)" if a.best_at_edge else "")
    return lr + " (partial curve)" if best is not None and a.gaps() else lr


def arm_table(cell: Cell) -> str:
    """Per arm: best LR, the loss there (mean [95% CI] over seeds), and its LR sensitivity."""
    pct = f"{LEVEL:.0%}"
    head = ["arm", "best LR", f"final val loss at best LR, mean [{pct} CI]", "seeds",
            f"LR sensitivity, mean [{pct} CI] over seeds", "diverged / no result (all LRs)"]  # fmt: skip
    rows = []
    for a in cell.arms:
        best = a.best
        lr = best_lr_text(a)
        diverged = sum(p.count(DIVERGED) for p in a.points)
        missing = sum(len(a.seeds) - len(p.results()) - p.count(DIVERGED) for p in a.points)
        sens, n_sens = a.sensitivity(), len(a.sensitivity_per_seed())
        sens_text = fmt_interval(sens)
        if sens is not None and n_sens < len(a.seeds):
            sens_text += f" ({n_sens} of {len(a.seeds)} seeds)"
        rows.append([
            f"`{a.arm}`", lr, fmt_interval(best.interval() if best else None),
            str(len(best.results())) if best else EMPTY, sens_text, f"{diverged} / {missing}",
        ])  # fmt: skip
    return table(head, rows)


def interval_test(c: Comparison) -> str:
    """The test behind the interval: paired t (n seeds, "of N" when fewer than planned), Welch t
    (its df), or none (one seed: no t statistic)."""
    if c.diff is None:
        return EMPTY
    if c.diff.test == "none":
        return f"none ({c.diff.n} seed{'s' if c.diff.n != 1 else ''})"
    if c.diff.test == "Welch t":
        return f"Welch t (df={c.diff.df:.1f})"
    of = f" of {c.planned_seeds} seeds" if c.planned_seeds and c.diff.n < c.planned_seeds else ""
    return f"{c.diff.test} (n={c.diff.n}{of})"


def jobs_with_result(c: Comparison) -> str:
    """How many of the planned (LR, seed) jobs of both arms the comparison rests on."""
    return f"{c.planned - c.n_gaps} of {c.planned}" if c.planned else EMPTY


def comparison_table(cell: Cell) -> str:
    """(arm − baseline) at each arm's best LR with its 95% CI, the test used, the planned jobs it
    rests on, and the verdict (never better/worse when a job of either arm has no result)."""
    head = ["arm", "baseline", f"Δ final val loss (arm − baseline), mean [{LEVEL:.0%} CI]", "test",
            "jobs with a result", "verdict"]  # fmt: skip
    rows = [
        [
            f"`{c.arm}`",
            f"`{c.baseline}`",
            fmt_interval(c.diff),
            interval_test(c),
            jobs_with_result(c),
            c.verdict,
        ]
        for c in cell.comparisons()
    ]
    return table(head, rows)


def across_cells_table(comparisons: Sequence[CellComparison]) -> str:
    """Each arm in one cell against itself in the reference cell, each at its own best LR."""
    head = ["arm", "cells", "other keys", f"Δ final val loss (cell − reference), mean [{LEVEL:.0%} CI]",
            "test", "jobs with a result", "verdict"]  # fmt: skip
    rows = []
    for x in comparisons:
        c = x.comparison
        fixed = ", ".join(f"{k}={v}" for k, v in x.fixed.items()) or EMPTY
        cells = f"{x.key}={x.value} − {x.key}={x.reference}"
        rows.append(
            [
                f"`{c.arm}`",
                cells,
                fixed,
                fmt_interval(c.diff),
                interval_test(c),
                jobs_with_result(c),
                c.verdict,
            ]
        )
    return table(head, rows)


def parse_table(report_md: str, heading: str = "## Jobs") -> list[dict[str, str]]:
    """The rows of the table under `heading` as dicts (header → cell), for tests and other tools."""
    lines = report_md.splitlines()
    at = lines.index(heading)
    start = next(i for i in range(at + 1, len(lines)) if lines[i].startswith("|"))  # past any note
    header = [c.strip() for c in lines[start].strip("|").split("|")]
    rows = []
    for line in itertools.takewhile(lambda s: s.startswith("|"), lines[start + 2 :]):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        rows.append(dict(zip(header, cells, strict=True)))
    return rows
