"""The report's downstream tasks (issue 38): per task and metric, each arm at its best LR by that
metric, the mean [95% CI] over seeds there, and (arm − baseline) with its CI and verdict, by the
rules of the val-loss tables (gptlab.analysis.sweep.arms, with a task's `Measure`).

The numbers are metrics.json `tasks` (the in-loop callback's last evaluation of each task, at the
run's end). A sweep none of whose jobs has one gets no section; a job without a task's numbers
(crashed, diverged, an older run) is counted and named, never averaged in.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gptlab.analysis.stats import LEVEL
from gptlab.analysis.sweep.arms import RESULT, Cell, Measure, arrange, outcome
from gptlab.analysis.sweep.jobs import Job
from gptlab.analysis.sweep.tables import (
    EMPTY,
    best_lr_text,
    fmt,
    fmt_interval,
    interval_test,
    jobs_with_result,
    label,
    table,
)

TASK_METRICS = ("acc_norm", "acc", "bpb")  # the table's order: acc_norm is what papers report
HIGHER_IS_BETTER = {"acc_norm": True, "acc": True, "bpb": False}

NOTE = (
    "From each job's metrics.json `tasks` (the task's last evaluation, at the run's end). acc: the "
    "share of items whose right choice has the highest log-likelihood; acc_norm: the same per UTF-8 "
    "byte of the choice; bpb: bits per byte of the right continuation (docs/evaluation.md). Each "
    "metric is a measure of its own, with the rules of the val-loss tables: each arm's best LR is "
    "chosen by that row's metric (the highest mean over seeds for acc and acc_norm, the lowest for "
    "bpb), among the LRs where every seed has the number; mean [95% t CI] over seeds there; Δ = "
    "(arm − baseline), each at its own best LR, paired t over seeds when both have the same seeds, "
    "Welch t otherwise. Verdict: better / worse when the CI excludes 0 (above 0 is better for acc "
    "and acc_norm, below 0 for bpb) and every planned job of both arms has the number; within noise "
    'when the CI holds 0; with one seed there is no interval, the mean alone "(n=1, no CI)", and '
    "no verdict. A job without a task's numbers (failed, diverged, never evaluated, an older run) is "
    "counted and named, never averaged in; a diverged job's numbers are not used either."
)


def task_measure(task: str, metric: str) -> Measure:
    """The `Measure` of one metric of one task (acc, acc_norm: higher is better; bpb: lower)."""
    return Measure(f"{task} {metric}", task, metric, HIGHER_IS_BETTER[metric])


def task_names(jobs: Sequence[Job]) -> list[str]:
    """Every task some job's metrics.json names, in first-seen order ([] when none has any)."""
    return list(dict.fromkeys(t for j in jobs for t in j.tasks()))


def _without(job: Job, task: str) -> str | None:
    """Why a job gives no number for the task (None: it gives all of them)."""
    if all(outcome(job, task_measure(task, m)) == RESULT for m in TASK_METRICS):
        return None
    if job.status == "diverged":
        return "diverged (not averaged)"
    if outcome(job) != RESULT:
        return job.status if job.status != "finished" else "no final val loss"
    if task not in job.tasks():
        return f"finished, no `{task}` in metrics.json `tasks`"
    missing = [m for m in TASK_METRICS if outcome(job, task_measure(task, m)) != RESULT]
    return f"finished, no finite {', '.join(missing)}"


def coverage(jobs: Sequence[Job], task: str) -> str:
    """ "Numbers from k of n jobs", and the jobs without them grouped by why."""
    reasons: dict[str, list[str]] = {}
    for j in jobs:
        why = _without(j, task)
        if why is not None:
            reasons.setdefault(why, []).append(j.name)
    counted = len(jobs) - sum(len(v) for v in reasons.values())
    text = f"Numbers from {counted} of {len(jobs)} jobs"
    if not reasons:
        return text + "."
    gaps = "; ".join(f"job{'s' if len(v) > 1 else ''} {', '.join(v)}: {why}" for why, v in reasons.items())
    return f"{text}; without them: {gaps}."


def _describe(jobs: Sequence[Job], task: str) -> str:
    """Items and chance level, as the jobs recorded them (both listed when jobs differ)."""
    entries = [j.tasks()[task] for j in jobs if task in j.tasks()]

    def values(key: str, form: str) -> str:
        found = sorted({v for e in entries if isinstance(v := e.get(key), int | float)})
        return ", ".join(form.format(v) for v in found) or EMPTY

    return f"items: {values('items', '{:.0f}')}; chance: {values('chance', '{:.4f}')}"


def task_table(cells: dict[str, Cell]) -> str:
    """One row per (metric, arm) of one cell: `cells` maps each metric to the cell arranged by it."""
    pct = f"{LEVEL:.0%}"
    head = ["metric", "arm", "best LR (by this metric)", f"mean [{pct} CI] at best LR", "seeds",
            f"Δ (arm − baseline), mean [{pct} CI]", "test", "jobs with a result", "verdict"]  # fmt: skip
    rows = []
    for metric, cell in cells.items():
        compared = {c.arm: c for c in cell.comparisons()}
        for a in cell.arms:
            best = a.best
            row = [metric, f"`{a.arm}`", best_lr_text(a), fmt_interval(best.interval() if best else None),
                   str(len(best.results())) if best else EMPTY]  # fmt: skip
            c = compared.get(a.arm)
            if c is None:  # the baseline
                row += [EMPTY, EMPTY, EMPTY, "baseline"]
            else:
                row += [fmt_interval(c.diff), interval_test(c), jobs_with_result(c), c.verdict]
            rows.append(row)
    return table(head, rows)


def task_heading(task: str, cell: Cell) -> str:
    return f"### Task `{task}`" + (f", {cell.title}" if cell.values else "")


def task_section(jobs: list[Job], record: dict[str, Any], sensitivity: str = "init") -> list[str]:
    """The report's "Downstream tasks" section; [] when no job has a task."""
    names = task_names(jobs)
    if not names:
        return []
    lines = ["## Downstream tasks", "", NOTE]
    for task in names:
        by_metric = {m: arrange(jobs, record, sensitivity, task_measure(task, m)) for m in TASK_METRICS}
        for k, cell in enumerate(by_metric[TASK_METRICS[0]]):
            members = [j for j in jobs if all(j.values.get(key) == v for key, v in cell.values.items())]
            summary = f"{coverage(members, task)} {_describe(members, task)}."
            cells = {m: by_metric[m][k] for m in TASK_METRICS}
            lines += ["", task_heading(task, cell), "", summary, "", task_table(cells)]
    return lines


BY_JOB_NOTE = (
    "Each job's metrics.json `tasks` (the last evaluation, at the run's end); — where a job has no "
    "number (failed, killed, not started, or a run without the task). Without an ablation grid there "
    "are no arms to compare: these are the raw numbers."
)


def job_task_table(jobs: Sequence[Job], keys: Sequence[str]) -> str | None:
    """A sweep without an ablation grid: each job's task numbers, one column per (task, metric);
    None when no job has a task."""
    names = task_names(jobs)
    if not names:
        return None
    head = ["job", "overrides", *[f"{t} {m}" for t in names for m in TASK_METRICS], "status"]
    rows = [
        [
            j.name,
            f"`{label(j, keys)}`",
            *[fmt(j.task_metric(t, m)) for t in names for m in TASK_METRICS],
            j.status,
        ]
        for j in jobs
    ]
    return table(head, rows)
