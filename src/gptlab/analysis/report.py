"""The report of a sweep directory: report.md with its tables and figures.

    python scripts/report.py multirun/<sweep dir> [out=<dir>]

For a sweep made by the ablation sweeper (it leaves ablation.json), the report answers the
ablation's question per cell: final val loss against LR per arm (a figure, and a table), each arm's
best LR with the loss there and its LR sensitivity, and every arm against the baseline with a 95%
CI and a verdict (definitions in gptlab.analysis.sweep.arms); when the jobs evaluated downstream tasks,
the same statistics per task and metric (gptlab.analysis.sweep.task_report), and on a ladder each task's
bpb fitted against N. Every sweep gets the job table (status of each job, spelled out), what is
missing, and figures.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import yaml

from gptlab.ablation.grid import LR_KEY, SEED_KEY
from gptlab.ablation.sweep_dir import read_record
from gptlab.analysis import budgets
from gptlab.analysis.budgets import surface
from gptlab.analysis.init import grad_profile
from gptlab.analysis.ladder import analyse as ladder
from gptlab.analysis.ladder import report as ladder_report
from gptlab.analysis.ladder.records import LadderError
from gptlab.analysis.sweep import attention, tables, task_report
from gptlab.analysis.sweep import figures as sweep_figures
from gptlab.analysis.sweep.arms import across_cells, arrange, check_sensitivity_mode, loss_at_init
from gptlab.analysis.sweep.jobs import Job, read_sweep
from gptlab.analysis.sweep.tables import parse_table  # noqa: F401 - re-exported: tests and tools read tables

SINK_NOTE = (
    "Sink: the mean over query rows t >= 1 of the attention probability on position 0 (telemetry's "
    "`attn_sink/block_XX`, before any output gate), at each seed's last attention step; a local "
    "layer's rows past its window cannot see position 0 and count 0. Δ: (arm − baseline) of the "
    "mean over blocks, each at its own best LR, paired t over seeds. Gate: `attn_gate` mean σ(x·W_g)."
)

SENSITIVITY_NOTE = {
    "init": "a run flagged diverged counted at the loss at init even when its final loss is finite "
    "(lr_sensitivity=init, the default; lr_sensitivity=wortsman takes the paper's min(final loss, loss "
    "at init))",
    "wortsman": "every run at min(final loss, loss at init), so only a non-finite final loss counts at "
    "the loss at init (lr_sensitivity=wortsman, the paper's definition; the default, init, counts every "
    "run flagged diverged at the loss at init)",
}


def ablation_note(sensitivity: str) -> str:
    return (
        "Final val loss = validation loss at the last step. Diverged jobs (non-finite, or a train loss "
        "above 3× its first) and jobs without a result (failed, killed, not started) are counted in the "
        "tables and never averaged in. Best LR: lowest mean over the LRs where every seed has a result "
        '("partial curve": some planned job of the arm has none). LR sensitivity (Wortsman et al. 2023): '
        "mean over the LR grid of min(loss, loss at init) − the grid's minimum, "
        f"{SENSITIVITY_NOTE[sensitivity]}; per seed (seeds with a missing job left out), then mean over "
        "seeds with a 95% t interval clipped to [0, loss at init], the range it cannot leave "
        '("(clipped)" where a bound moved). Comparison: (arm − baseline), each at its own best LR; '
        "paired t over seeds when both have the same seeds, Welch t otherwise, no interval with one "
        "seed; better/worse when the 95% CI excludes 0 and every planned (LR, seed) job of both arms "
        'has a result. Otherwise the verdict names the jobs without one: "incomplete" when some have '
        'no result at all, "inconclusive (partial curve)" when all of them diverged.'
    )


ACROSS_NOTE = (
    "Each arm against itself in the cell whose value of that key is the grid's first (e.g. n_layer=8 "
    "against n_layer=2: the depth check), each cell at its own best LR, the other keys equal; paired t "
    "over seeds when both cells have results for the same seeds, Welch t otherwise. The same rule for "
    "incomplete comparisons: better/worse only when every planned job of the arm in both cells has a result."
)


def varying_keys(jobs: Sequence[Job]) -> list[str]:
    """Override keys whose value differs between jobs (or is absent from some), in first-seen order."""
    keys = list(dict.fromkeys(k for j in jobs for k in j.values))
    if len(jobs) < 2:
        return [k for k in keys if k != "experiment"]
    return [k for k in keys if len({j.values.get(k) for j in jobs}) > 1]


def common_overrides(jobs: Sequence[Job], varying: Sequence[str]) -> list[str]:
    """Overrides that every job shares (shown once above the table)."""
    if not jobs:
        return []
    first = jobs[0].values
    return [
        f"{k}={v}" for k, v in first.items() if k not in varying and all(j.values.get(k) == v for j in jobs)
    ]


def optuna_results(sweep_dir: Path) -> str | None:
    """The optuna sweeper's optimization_results.yaml, if the search has finished."""
    path = sweep_dir / "optimization_results.yaml"
    if not path.is_file():
        return None
    res = yaml.safe_load(path.read_text()) or {}
    return f"best value {res.get('best_value')} at {res.get('best_params')}"


def lr_grid_text(record: dict) -> str:
    """The LR grid as the report states it: one list, or one per rung of a ladder."""
    if not record.get("ladder_key"):
        return ", ".join(record["lrs"])
    key = record["ladder_key"]
    return "; ".join(f"{key}={v}: {', '.join(lrs)}" for v, lrs in record["rung_lrs"].items())


def ablation_section(
    jobs: list[Job], record: dict, out: Path, figures: bool, sensitivity: str = "init"
) -> tuple[list[str], list[Path]]:
    """The ablation's tables (per cell) and its LR figure; returns markdown lines and figure paths."""
    cells = arrange(jobs, record, sensitivity)
    init = loss_at_init(jobs)
    experiment = str(
        next((j.values.get("experiment") for j in jobs if j.values.get("experiment")), "ablation")
    )
    lines = [
        "## Ablation",
        "",
        f"Arms `{record['arm']}`: {', '.join(f'`{a}`' for a in record['arms'])}; "
        f"baseline `{record['baseline']}`. "
        f"LR grid `{LR_KEY}`: {lr_grid_text(record)}. Seeds `{SEED_KEY}`: {', '.join(record['seeds'])}. "
        f"Loss at init: ln(vocab) = {tables.fmt(init)}.",
        "",
        ablation_note(sensitivity),
    ]
    made = []
    if figures:
        path = sweep_figures.lr_figure(cells, experiment, out)
        made.append(path)
        lines += ["", f"![final val loss against LR]({path.relative_to(out.parent)})"]
    for cell in cells:
        lines += ["", f"### {cell.title}", "", "#### Arms", "", tables.arm_table(cell)]
        lines += ["", "#### Final val loss by LR, mean [95% CI] over seeds", "", tables.lr_table(cell)]
        lines += ["", "#### Against the baseline", "", tables.comparison_table(cell)]
        profile = grad_profile.profile_table(cell)
        if profile:
            lines += ["", "#### FFN gradient norm by block, first telemetry step, best LR (mean over seeds)"]
            lines += ["", profile]
        sink = attention.sink_table(cell)
        if sink:
            lines += ["", "#### Attention sink by block, last attention step, best LR (mean over seeds)"]
            lines += ["", SINK_NOTE, "", sink]
    order = {k: list(v) for k, v in record.get("cells", {}).items() if len(v) > 1}
    if record.get("ladder_key"):  # the ladder answers across sizes; "across cells" would not
        order = {k: v for k, v in order.items() if k != record["ladder_key"]}
    if order:
        across = tables.across_cells_table(across_cells(cells, order))
        lines += ["", "### Across cells", "", ACROSS_NOTE, "", across]
    return lines, made


def seed_subset(jobs: list[Job], record: dict | None, seeds: str, root: Path) -> tuple[list[Job], dict, str]:
    """The jobs and grid of the planned seeds named in `seeds` ("1,2"), and the report's line saying
    so; ValueError when the sweep is no ablation or a seed is not planned."""
    planned = list(record.get("seeds", [])) if record else []
    chosen = [s.strip() for s in seeds.split(",") if s.strip()]
    if not chosen or not set(chosen) <= set(planned) or len(set(chosen)) != len(chosen):
        have = ", ".join(planned) if planned else "none: not an ablation sweep"
        raise ValueError(
            f"seeds={seeds!r} is not accepted for {root}: give distinct planned seeds, "
            f"comma-separated (its seeds: {have})"
        )
    kept = [j for j in jobs if j.values.get(SEED_KEY) in chosen]
    note = (
        f"Judged on seeds {', '.join(chosen)} of the planned {', '.join(planned)} (`seeds={seeds}`): "
        f"the {len(jobs) - len(kept)} job(s) of the other seeds are left out of every table."
    )
    return kept, {**record, "seeds": chosen}, note  # type: ignore[dict-item]


def write_report(
    sweep_dir: str | Path,
    out: str | Path | None = None,
    figures: bool = True,
    baseline: str | None = None,
    sensitivity: str = "init",
    seeds: str | None = None,
) -> Path:
    """Write report.md (and figures/*.png) for the sweep; returns the report's path. `baseline`
    replaces the sweep's baseline arm in the comparisons (ValueError when it is not an arm);
    `sensitivity` is what a diverged run counts as in LR sensitivity (arms.SENSITIVITY_MODES);
    `seeds` ("1,2") judges the sweep on those planned seeds alone (a sweep stopped before its last)."""
    check_sensitivity_mode(sensitivity)  # checked before anything is written
    root = Path(sweep_dir)
    jobs = read_sweep(root)
    record = read_record(root)
    subset_note = None
    if seeds is not None:  # checked before anything is written
        jobs, record, subset_note = seed_subset(jobs, record, seeds, root)
    if baseline is not None:  # checked before anything is written
        if record is None or baseline not in record.get("arms", []):
            arms = ", ".join(record.get("arms", [])) if record else "none: not an ablation sweep"
            raise ValueError(f"baseline={baseline!r} is not an arm of {root} (its arms: {arms})")
        record = {**record, "baseline": baseline}
    out_dir = Path(out) if out is not None else root
    fig_dir = out_dir / "figures"
    if figures:
        fig_dir.mkdir(parents=True, exist_ok=True)
    out_dir.mkdir(parents=True, exist_ok=True)
    keys = varying_keys(jobs)
    finished = sum(1 for j in jobs if j.status in ("finished", "diverged"))
    lines = [f"# Sweep report: `{root}`", ""]
    lines.append(
        f"{len(jobs)} job(s): {finished} finished (incl. diverged), "
        f"{len(jobs) - finished} failed, missing or not started."
    )
    if subset_note:
        lines += ["", subset_note]
    common = common_overrides(jobs, keys)
    if common:
        lines += ["", "Common to every job: `" + " ".join(common) + "`"]
    if keys:
        lines += ["", "Varied: " + ", ".join(f"`{k}`" for k in keys)]
    best = optuna_results(root)
    if best:
        lines += ["", f"Optuna: {best}"]
    refused = ""
    if record is not None and record.get("ladder_key") and record.get("budgets"):
        lines += ["", *surface.surface_section(jobs, record, root)]  # sizes × budgets: one surface per arm
    else:
        section, refused = record_sections(jobs, record, fig_dir, figures, sensitivity)
        lines += section
    lines += ["", "## Jobs", "", tables.job_table(jobs, keys)]
    seeds = tables.seed_table(jobs, keys) if record is None else None
    if seeds:
        lines += ["", "## Over seeds", "", seeds]
    by_job = task_report.job_task_table(jobs, keys) if record is None else None
    if by_job:
        lines += ["", "## Downstream tasks by job", "", task_report.BY_JOB_NOTE, "", by_job]
    incomplete = [j for j in jobs if j.problems]
    if incomplete:
        lines += ["", "## Missing or incomplete", ""]
        lines += [f"- job {j.name} (`{tables.label(j, keys)}`): {'; '.join(j.problems)}" for j in incomplete]
    if figures:
        numeric = [k for k in keys if record is None or k != LR_KEY]  # the ablation figure has LR already
        made = sweep_figures.per_job_figures(jobs, keys, fig_dir) + sweep_figures.loss_against_keys(
            jobs, numeric, fig_dir
        )
        if made:
            lines += ["", "## Figures"]
            for caption, path in made:
                lines += ["", f"### {caption}", "", f"![{caption}]({path.relative_to(out_dir)})"]
    report = out_dir / "report.md"
    report.write_text("\n".join(lines) + "\n")
    if refused:  # bad input for the fit: the report (its per-rung table) is written, the CLI exits 2
        raise LadderError(f"{refused}; the per-rung table is in {report}")
    return report


def record_sections(
    jobs: list[Job], record: dict | None, out: Path, figures: bool, sensitivity: str
) -> tuple[list[str], str]:
    """The ablation's sections: the ladder's (when one), then the budgets' or the plain grid's
    with its tasks; and why a ladder's fit was refused ("" when it was not)."""
    lines: list[str] = []
    refused = ""
    if record is not None and record.get("ladder_key"):
        section, refused = ladder_section(jobs, record, out, figures, sensitivity)
        lines += ["", *section]
    if record is not None and record.get("budgets"):  # trunks and branches: loss against tokens
        lines += ["", *budgets.budget_section(jobs, record, out, figures, sensitivity)]
    elif record is not None:
        section, _ = ablation_section(jobs, record, out, figures, sensitivity)
        lines += ["", *section]
        tasks = task_report.task_section(jobs, record, sensitivity)
        if tasks:
            lines += ["", *tasks]
    return lines, refused


def ladder_section(
    jobs: list[Job], record: dict, out: Path, figures: bool, sensitivity: str
) -> tuple[list[str], str]:
    """The ladder's per-rung table, fits, extrapolation and figure; and why the fit was refused
    ("" when it was not)."""
    try:
        result = ladder.analyse(arrange(jobs, record, sensitivity), record)
    except LadderError as err:  # a ladder this report cannot fit (crossed with further cells)
        return ["## Ladder", "", f"**No fit**: {err}."], str(err)
    lines = ladder_report.ladder_lines(result)
    if figures and not result.refused:
        named = (j.values.get("experiment") for j in jobs if j.values.get("experiment"))
        experiment = str(next(named, "ladder"))
        path = ladder_report.ladder_figure(result, experiment, out)
        if path is not None:
            lines += ["", f"![final val loss against N]({path.relative_to(out.parent)})"]
    if not result.refused:  # each task's bpb on the same ladder (issue 38): OLMo's first step
        for task in task_report.task_names(jobs):
            bpb = task_report.task_measure(task, "bpb")
            fitted = ladder.analyse(arrange(jobs, record, sensitivity, bpb), record)
            lines += ["", *ladder_report.task_ladder_lines(fitted, task)]
    return lines, result.refused
