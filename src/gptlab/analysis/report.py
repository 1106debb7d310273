"""The report of a sweep directory: one table row per job, figures, and what is missing.

Reads only files on disk (each job's `.hydra/overrides.yaml`, `metrics.json`, `csv/metrics.csv`
and the sweep's `multirun.yaml`), so it needs neither wandb nor a network and works on a sweep that
is still running or partly failed: a job without metrics.json, with a failed status, with a
truncated CSV, or not started yet is listed as such.

    python scripts/report.py multirun/<sweep dir> [out=<dir>]
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import logging
import math
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

log = logging.getLogger(__name__)

BASIC_SWEEPER = "hydra._internal.core_plugins.basic_sweeper.BasicSweeper"
_BLOCK_COL = re.compile(r"^grad_norm/block_(\d+)$")
MISSING = "—"
SEED_KEYS = ("seed",)


@dataclass
class Job:
    """What one job directory holds; every field may be absent on an unfinished or failed sweep."""

    name: str
    path: Path | None
    overrides: list[str]
    metrics: dict[str, Any] | None = None
    status: str = "missing"  # finished | failed | diverged | missing | unreadable | not started
    problems: list[str] = field(default_factory=list)
    log: dict[str, list[tuple[int, float]]] = field(default_factory=dict)  # csv metric → (step, v)

    @property
    def values(self) -> dict[str, str]:
        """The overrides as key → value (the key as written: `model/placement`, `optim.lr`)."""
        return dict(_split(o) for o in self.overrides)

    def metric(self, key: str) -> float | None:
        """A number from metrics.json, or None when absent or not a number."""
        if not self.metrics:
            return None
        value = self.metrics.get(key)
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        return float(value)

    def last_step(self) -> int | None:
        """The last step the CSV log reached (for jobs without metrics.json)."""
        steps = [s for series in self.log.values() for s, _ in series]
        return max(steps) if steps else None


def _split(override: str) -> tuple[str, str]:
    key, _, value = override.partition("=")
    return key.lstrip("+~"), value


def _job_order(name: str) -> tuple[int, int | str]:
    return (0, int(name)) if name.isdigit() else (1, name)


# ---- reading -------------------------------------------------------------------------------------


def read_csv_log(path: Path) -> tuple[dict[str, list[tuple[int, float]]], list[str]]:
    """Lightning's CSV log as metric → [(step, value)], tolerating a file cut off mid-write.

    A last line without its newline is dropped (it may hold a number cut short), as is any row
    whose field count does not match the header; both are reported as problems.
    """
    problems: list[str] = []
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return {}, ["no csv/metrics.csv"]
    if text and not text.endswith("\n"):
        text = text[: text.rfind("\n") + 1]
        problems.append("csv/metrics.csv truncated (partial last line dropped)")
    rows = list(csv.reader(io.StringIO(text)))
    if not rows:
        return {}, problems + ["csv/metrics.csv is empty"]
    header, body = rows[0], rows[1:]
    if "step" not in header:
        return {}, problems + ["csv/metrics.csv has no step column"]
    step_col = header.index("step")
    series: dict[str, list[tuple[int, float]]] = {}
    bad = 0
    for row in body:
        if len(row) != len(header):
            bad += 1
            continue
        try:
            step = int(float(row[step_col]))
        except ValueError:
            bad += 1
            continue
        for name, cell in zip(header, row, strict=True):
            if cell == "" or name in ("step", "epoch"):
                continue
            try:
                series.setdefault(name, []).append((step, float(cell)))
            except ValueError:
                bad += 1
    if bad:
        problems.append(f"csv/metrics.csv: {bad} malformed row(s) or cell(s) skipped")
    return series, problems


def read_job(path: Path) -> Job:
    """Everything the report needs from one job directory, with what is missing noted."""
    job = Job(name=path.name, path=path, overrides=[])
    overrides_file = path / ".hydra" / "overrides.yaml"
    if overrides_file.is_file():
        try:
            job.overrides = [str(o) for o in (yaml.safe_load(overrides_file.read_text()) or [])]
        except yaml.YAMLError:
            job.problems.append(".hydra/overrides.yaml unreadable")
    metrics_file = path / "metrics.json"
    if metrics_file.is_file():
        try:
            job.metrics = json.loads(metrics_file.read_text())
            if not isinstance(job.metrics, dict):
                raise ValueError("not an object")
        except (json.JSONDecodeError, ValueError):
            job.metrics = None
            job.status = "unreadable"
            job.problems.append("metrics.json unreadable")
    else:
        job.problems.append("no metrics.json (running, killed or crashed)")
    if job.metrics is not None:
        status = str(job.metrics.get("status", "finished"))
        job.status = "diverged" if status == "finished" and job.metrics.get("diverged") else status
        if status == "failed":
            job.problems.append(str(job.metrics.get("error", "no error recorded")))
        elif status == "running":
            job.problems.append("no final metrics (still running, or killed)")
        elif status not in ("finished", "diverged"):
            job.problems.append(f"ended with status {status!r}")
        if not job.overrides:
            job.overrides = [str(o) for o in job.metrics.get("overrides", [])]
    job.log, csv_problems = read_csv_log(path / "csv" / "metrics.csv")
    if job.status != "failed":
        job.problems += csv_problems
    return job


def expected_jobs(sweep_dir: Path) -> list[list[str]] | None:
    """The override lists of every job the basic sweeper will run, rebuilt from multirun.yaml the
    way the sweeper builds them; None for other sweepers (their trials are decided as they go)."""
    master = sweep_dir / "multirun.yaml"
    if not master.is_file():
        return None
    try:
        from omegaconf import OmegaConf

        hydra = OmegaConf.to_container(OmegaConf.load(master).hydra, resolve=False)
        if hydra["sweeper"].get("_target_") != BASIC_SWEEPER:
            return None
        from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
        from hydra.core.override_parser.overrides_parser import OverridesParser

        params = [f"{k}={v}" for k, v in (hydra["sweeper"].get("params") or {}).items()]
        task = [str(o) for o in hydra["overrides"]["task"]]
        parsed = OverridesParser.create().parse_overrides(params + task)
        return BasicSweeper.split_arguments(parsed, None)[0]
    except Exception as err:  # noqa: BLE001 - a report must still come out of an odd sweep dir
        log.warning("could not rebuild the sweep's job list from %s: %s", master, err)
        return None


def read_sweep(sweep_dir: str | Path) -> list[Job]:
    """The jobs of a sweep: every job directory found, plus the basic sweeper's jobs not started."""
    root = Path(sweep_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"sweep dir {str(root)!r} does not exist; give a multirun/<...> directory")
    dirs = [
        d
        for d in root.iterdir()
        if d.is_dir() and ((d / ".hydra").is_dir() or (d / "metrics.json").is_file() or (d / "csv").is_dir())
    ]
    jobs = [read_job(d) for d in sorted(dirs, key=lambda d: _job_order(d.name))]
    planned = expected_jobs(root)
    if planned is not None:
        seen = [sorted(j.overrides) for j in jobs]
        for k, overrides in enumerate(planned):
            if sorted(overrides) not in seen:
                jobs.append(
                    Job(
                        name=f"({k})",
                        path=None,
                        overrides=list(overrides),
                        status="not started",
                        problems=["no job dir yet"],
                    )
                )
    return jobs


# ---- summarising ---------------------------------------------------------------------------------


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


def label(job: Job, keys: Sequence[str]) -> str:
    """A short name from the job's varying overrides: the last part of each key, e.g. n_layer=12."""
    vals = job.values
    parts = [f"{re.split(r'[./]', k)[-1]}={vals.get(k, '?')}" for k in keys]
    return ", ".join(parts) or job.name


def _fmt(value: float | None, digits: int = 4) -> str:
    if value is None:
        return MISSING
    if not math.isfinite(value):
        return str(value)
    return f"{value:.{digits}f}"


def _num(value: str) -> float | None:
    try:
        return float(value)
    except ValueError:
        return None


def job_table(jobs: Sequence[Job], keys: Sequence[str]) -> str:
    """The markdown table, one row per job (planned-but-not-started jobs included)."""
    head = [
        "job",
        "overrides",
        "params",
        "steps",
        "best val loss",
        "final val loss",
        "final train loss",
        "max grad norm",
        "tokens/s",
        "diverged",
        "status",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for j in jobs:
        overrides = ", ".join(f"{k}={j.values[k]}" for k in keys if k in j.values) or MISSING
        m = j.metrics or {}
        params = m.get("num_params")
        steps: str = str(m["steps"]) if "steps" in m else MISSING
        if "steps" not in m and j.last_step() is not None:
            steps = f"{j.last_step()} (csv)"
        tps = j.metric("tokens_per_sec")
        diverged = m.get("diverged")
        status = j.status if not j.problems else f"{j.status}: {'; '.join(j.problems)}"
        row = [
            j.name,
            f"`{overrides}`",
            f"{params:,}" if isinstance(params, int) else MISSING,
            steps,
            _fmt(j.metric("best_val_loss")),
            _fmt(j.metric("final_val_loss")),
            _fmt(j.metric("final_train_loss")),
            _fmt(j.metric("max_grad_norm"), 3),
            f"{tps:.0f}" if tps is not None and math.isfinite(tps) else MISSING,
            MISSING if diverged is None else ("yes" if diverged else "no"),
            status.replace("|", "/"),
        ]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def seed_table(jobs: Sequence[Job], keys: Sequence[str]) -> str | None:
    """Mean ± sd over seeds of each variant's best val and final train loss (None: no seed sweep)."""
    seeds = [k for k in keys if k in SEED_KEYS]
    others = [k for k in keys if k not in SEED_KEYS]
    if not seeds:
        return None
    groups: dict[str, list[Job]] = {}
    for j in jobs:
        groups.setdefault(label(j, others), []).append(j)

    def stat(js: list[Job], key: str) -> str:
        vals = [v for v in (j.metric(key) for j in js) if v is not None and math.isfinite(v)]
        if not vals:
            return MISSING
        sd = statistics.stdev(vals) if len(vals) > 1 else float("nan")
        return f"{statistics.fmean(vals):.4f} ± {sd:.4f}" if len(vals) > 1 else f"{vals[0]:.4f}"

    lines = [
        "| variant | seeds with metrics | best val loss (mean ± sd) | final train loss (mean ± sd) |",
        "|---|---|---|---|",
    ]
    for name, js in groups.items():
        n = sum(1 for j in js if j.metric("best_val_loss") is not None)
        lines.append(
            f"| `{name}` | {n}/{len(js)} | {stat(js, 'best_val_loss')} | {stat(js, 'final_train_loss')} |"
        )
    return "\n".join(lines)


def grad_matrix(job: Job) -> tuple[list[list[float]], list[int]]:
    """Block × step gradient norms from the CSV log (rows: block 0 = input side)."""
    cols = sorted(
        ((int(m.group(1)), name) for name in job.log if (m := _BLOCK_COL.match(name))),
    )
    if not cols:
        return [], []
    steps = sorted({s for _, name in cols for s, _ in job.log[name]})
    matrix = []
    for _, name in cols:
        by_step = dict(job.log[name])
        matrix.append([by_step.get(s, float("nan")) for s in steps])
    return matrix, steps


# ---- figures -------------------------------------------------------------------------------------


def _facet(jobs: Sequence[Job], keys: Sequence[str]) -> tuple[str | None, list[str]]:
    """Split many curves into panels by the first varying key when there are many jobs."""
    if len(keys) >= 2 and len(jobs) > 8:
        return keys[0], list(keys[1:])
    return None, list(keys)


def _numeric_keys(jobs: Sequence[Job], keys: Sequence[str]) -> list[str]:
    """Varying keys whose values are all numbers and that make a sensible x axis (not the seed)."""
    out = []
    for k in keys:
        if k in SEED_KEYS:
            continue
        vals = {j.values.get(k) for j in jobs}
        if None not in vals and all(_num(v) is not None for v in vals) and len(vals) >= 3:
            out.append(k)
    return out


def make_figures(jobs: Sequence[Job], keys: Sequence[str], out: Path) -> list[tuple[str, Path]]:
    """Loss curves, grad-norm heat maps and depth profiles, and loss against each numeric key."""
    from gptlab.analysis.figures import curve_panels, heatmap_grid

    out.mkdir(parents=True, exist_ok=True)
    made: list[tuple[str, Path]] = []
    logged = [j for j in jobs if j.log]
    facet, rest = _facet(logged, keys)

    def panel_of(j: Job) -> str:
        return f"{facet}={j.values.get(facet, '?')}" if facet else "all jobs"

    if logged:
        train: dict[str, dict[str, tuple[list[float], list[float]]]] = {}
        val: dict[str, dict[str, tuple[list[float], list[float]]]] = {}
        for j in logged:
            name = label(j, rest)
            tr = j.log.get("train/loss", [])
            va = j.log.get("val/loss", [])
            train.setdefault(panel_of(j), {})[name] = ([s for s, _ in tr], [v for _, v in tr])
            val.setdefault(panel_of(j), {})[name] = ([s for s, _ in va], [v for _, v in va])
        path = curve_panels(
            train,
            out / "loss_curves.png",
            "step",
            "train loss (lines), val loss (dots)",
            title="loss curves",
            markers=False,
            dots=val,
        )
        made.append(("Loss curves (train: lines; validation: dots)", path))

    heat = [(label(j, keys), *grad_matrix(j)) for j in logged]
    if any(m for _, m, _ in heat):
        path = heatmap_grid(
            heat,
            out / "grad_norm_heatmaps.png",
            title="gradient norm per block (layer × step), shared log scale",
        )
        made.append(("Gradient norm per block, layer × step, one panel per job", path))
        first: dict[str, dict[str, tuple[list[float], list[float]]]] = {}
        for j in logged:
            matrix, steps = grad_matrix(j)
            if not matrix:
                continue
            blocks = list(range(len(matrix)))
            for where, col in (("first logged step", 0), ("last logged step", -1)):
                title = f"{panel_of(j)} — {where}" if facet else where
                first.setdefault(title, {})[label(j, rest)] = (blocks, [row[col] for row in matrix])
        path = curve_panels(
            first,
            out / "grad_norm_depth_profile.png",
            "block index (input → output)",
            "gradient L2 norm",
            title="gradient norm by depth",
            logy=True,
            ncols=2,
        )
        made.append(("Depth profile of gradient norms at the first logged step and at the end", path))

    for x in _numeric_keys(jobs, keys):
        others = [k for k in keys if k != x and k not in SEED_KEYS]
        panel_key = others[-1] if len(others) >= 2 else None
        line_keys = others[:-1] if panel_key else others
        panels: dict[str, dict[str, tuple[list[float], list[float]]]] = {}
        for j in jobs:
            if j.status not in ("finished", "diverged", "failed"):
                continue  # running, killed or preempted: its last val loss is not a final one
            xv = _num(j.values.get(x, ""))
            if xv is None:
                continue
            y = j.metric("final_val_loss")
            if y is None:  # still running, killed or failed before validating: nothing to plot
                continue
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
        logx = values[0] > 0 and values[-1] / values[0] >= 20
        short = re.split(r"[./]", x)[-1]
        path = curve_panels(
            panels,
            out / f"val_loss_vs_{short}.png",
            x,
            "final val loss",
            title=f"final validation loss against {x}",
            logx=logx,
            markers=True,
        )
        made.append((f"Final validation loss against {x}", path))
    return made


# ---- the report ------------------------------------------------------------------------------


def optuna_results(sweep_dir: Path) -> str | None:
    """The optuna sweeper's optimization_results.yaml, if the search has finished."""
    path = sweep_dir / "optimization_results.yaml"
    if not path.is_file():
        return None
    res = yaml.safe_load(path.read_text()) or {}
    return f"best value {res.get('best_value')} at {res.get('best_params')}"


def write_report(sweep_dir: str | Path, out: str | Path | None = None, figures: bool = True) -> Path:
    """Write report.md (and figures/*.png) for the sweep; returns the report's path."""
    root = Path(sweep_dir)
    jobs = read_sweep(root)
    out_dir = Path(out) if out is not None else root
    out_dir.mkdir(parents=True, exist_ok=True)
    keys = varying_keys(jobs)
    finished = sum(1 for j in jobs if j.status in ("finished", "diverged"))
    lines = [f"# Sweep report: `{root}`", ""]
    lines.append(
        f"{len(jobs)} job(s): {finished} finished (incl. diverged), "
        f"{len(jobs) - finished} failed, missing or not started."
    )
    common = common_overrides(jobs, keys)
    if common:
        lines += ["", "Common to every job: `" + " ".join(common) + "`"]
    if keys:
        lines += ["", "Varied: " + ", ".join(f"`{k}`" for k in keys)]
    best = optuna_results(root)
    if best:
        lines += ["", f"Optuna: {best}"]
    lines += ["", "## Jobs", "", job_table(jobs, keys)]
    seeds = seed_table(jobs, keys)
    if seeds:
        lines += ["", "## Over seeds", "", seeds]
    incomplete = [j for j in jobs if j.problems]
    if incomplete:
        lines += ["", "## Missing or incomplete", ""]
        lines += [f"- job {j.name} (`{label(j, keys)}`): {'; '.join(j.problems)}" for j in incomplete]
    if figures:
        made = make_figures(jobs, keys, out_dir / "figures")
        if made:
            lines += ["", "## Figures"]
            for caption, path in made:
                lines += ["", f"### {caption}", "", f"![{caption}]({path.relative_to(out_dir)})"]
    report = out_dir / "report.md"
    report.write_text("\n".join(lines) + "\n")
    return report


def parse_table(report_md: str) -> list[dict[str, str]]:
    """The rows of the report's job table as dicts (header → cell), for tests and other tools."""
    lines = report_md.splitlines()
    start = lines.index("## Jobs") + 2
    header = [c.strip() for c in lines[start].strip("|").split("|")]
    rows = []
    for line in itertools.takewhile(lambda s: s.startswith("|"), lines[start + 2 :]):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        rows.append(dict(zip(header, cells, strict=True)))
    return rows
