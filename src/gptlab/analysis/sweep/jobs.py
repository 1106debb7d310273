"""Reading a sweep directory: one `Job` per job directory, plus the planned jobs not started yet.

Reads only files on disk (each job's `.hydra/overrides.yaml`, `metrics.json`, `csv/metrics*.csv`,
and the sweep's `ablation.json` or `multirun.yaml`), so it needs neither wandb nor a network and
works on a sweep that is still running or partly failed: a job without metrics.json, with a failed
status, with a truncated CSV, or not started yet is listed as such.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gptlab.ablation.grid import RESUME_KEYS
from gptlab.ablation.sweep_dir import read_record

log = logging.getLogger(__name__)

BASIC_SWEEPER = "hydra._internal.core_plugins.basic_sweeper.BasicSweeper"
NONFINITE_ERROR = "error: non-finite gradient"  # NonFiniteError's message (callbacks/nonfinite.py)
Series = dict[str, list[tuple[int, float]]]


@dataclass
class Job:
    """What one job directory holds; every field may be absent on an unfinished or failed sweep."""

    name: str
    path: Path | None
    overrides: list[str]
    metrics: dict[str, Any] | None = None
    status: str = "missing"  # finished | failed | diverged | missing | unreadable | not started | ...
    problems: list[str] = field(default_factory=list)
    log: Series = field(default_factory=dict)  # csv metric → [(step, value)]

    @property
    def values(self) -> dict[str, str]:
        """The overrides as key → value (key as written: `model/placement`, `optim.lr`), without
        the keys a resumed job was re-launched with."""
        pairs = (_split(o) for o in self.overrides)
        return {k: v for k, v in pairs if k not in RESUME_KEYS}

    def metric(self, key: str) -> float | None:
        """A number from metrics.json, or None when absent or not a number."""
        if not self.metrics:
            return None
        value = self.metrics.get(key)
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        return float(value)

    def tasks(self) -> dict[str, dict[str, Any]]:
        """metrics.json `tasks` (issue 38): task name → its last evaluation ({"acc", "acc_norm", "bpb",
        "items", "chance", "step"}); {} when absent, empty or not a mapping (an older run, a job
        that never reached its final evaluation)."""
        found = (self.metrics or {}).get("tasks")
        if not isinstance(found, dict):
            return {}
        return {str(k): v for k, v in found.items() if isinstance(v, dict)}

    def task_metric(self, task: str, key: str) -> float | None:
        """One number of one task from metrics.json `tasks`, or None when absent or not a number."""
        value = self.tasks().get(task, {}).get(key)
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


def job_order(name: str) -> tuple[int, int | str]:
    return (0, int(name)) if name.isdigit() else (1, name)


def read_csv_file(path: Path) -> tuple[Series, list[str]]:
    """Lightning's CSV log as metric → [(step, value)], tolerating a file cut off mid-write.

    A last line without its newline is dropped (it may hold a number cut short), as is any row
    whose field count does not match the header; both are reported as problems.
    """
    problems: list[str] = []
    name = f"csv/{path.name}"
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return {}, [f"no {name}"]
    if text and not text.endswith("\n"):
        text = text[: text.rfind("\n") + 1]
        problems.append(f"{name} truncated (partial last line dropped)")
    rows = list(csv.reader(io.StringIO(text)))
    if not rows:
        return {}, problems + [f"{name} is empty"]
    header, body = rows[0], rows[1:]
    if "step" not in header:
        return {}, problems + [f"{name} has no step column"]
    step_col = header.index("step")
    series: Series = {}
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
        for col, cell in zip(header, row, strict=True):
            if cell == "" or col in ("step", "epoch"):
                continue
            try:
                series.setdefault(col, []).append((step, float(cell)))
            except ValueError:
                bad += 1
    if bad:
        problems.append(f"{name}: {bad} malformed row(s) or cell(s) skipped")
    return series, problems


def read_csv_log(path: Path) -> tuple[Series, list[str]]:
    """A job's CSV log, with the parts a resumed job's earlier attempts left (metrics.part-N.csv,
    see training/loggers.py) joined in order: a later part replaces the steps it re-ran."""
    parts = sorted(path.parent.glob("metrics.part-*.csv"), key=lambda p: int(p.stem.rsplit("-", 1)[1]))
    if not parts:
        return read_csv_file(path)
    merged: Series = {}
    problems: list[str] = []
    for part in [*parts, path]:
        series, found = read_csv_file(part)
        problems += [p for p in found if not (part == path and p.startswith("no "))]
        steps = [s for values in series.values() for s, _ in values]
        if not steps:
            continue
        start = min(steps)
        for key in list(merged):
            merged[key] = [(s, v) for s, v in merged[key] if s < start]
        for key, values in series.items():
            merged.setdefault(key, []).extend(values)
    return merged, problems


def diverged(metrics: dict[str, Any]) -> bool:
    """The run diverged: metrics.json says so, or training stopped on a non-finite step."""
    if metrics.get("diverged"):
        return True
    error = str(metrics.get("error") or "")
    final = metrics.get("final_val_loss")
    non_finite = isinstance(final, int | float) and not math.isfinite(final)
    return error.startswith(NONFINITE_ERROR) or non_finite


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
        job.status = "diverged" if status in ("finished", "failed") and diverged(job.metrics) else status
        if status == "failed":
            job.problems.append(str(job.metrics.get("error", "no error recorded")))
        elif status == "running":
            job.problems.append("no final metrics (still running, or killed)")
        elif status not in ("finished", "diverged"):
            job.problems.append(f"ended with status {status!r}")
        if not job.overrides:
            job.overrides = [str(o) for o in job.metrics.get("overrides", [])]
    job.log, csv_problems = read_csv_log(path / "csv" / "metrics.csv")
    if not (job.metrics and job.metrics.get("status") == "failed"):  # its error says enough
        job.problems += csv_problems
    return job


def planned_jobs(sweep_dir: Path) -> list[list[str]] | None:
    """The override lists of every job the sweep will run: from ablation.json (the ablation
    sweeper's record), else rebuilt from multirun.yaml the way Hydra's basic sweeper builds them;
    None for other sweepers (their trials are decided as they go)."""
    record = read_record(sweep_dir)
    if record is not None:
        return [list(j) for j in record.get("jobs", [])]
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
    """The jobs of a sweep: every job directory found, plus the planned jobs not started."""
    root = Path(sweep_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"sweep dir {str(root)!r} does not exist; give a multirun/<...> directory")
    dirs = [
        d
        for d in root.iterdir()
        if d.is_dir() and ((d / ".hydra").is_dir() or (d / "metrics.json").is_file() or (d / "csv").is_dir())
    ]
    jobs = [read_job(d) for d in sorted(dirs, key=lambda d: job_order(d.name))]
    planned = planned_jobs(root)
    if planned is not None:
        seen = [sorted(f"{k}={v}" for k, v in j.values.items()) for j in jobs]
        for k, overrides in enumerate(planned):
            if sorted(overrides) not in seen:
                job = Job(name=f"({k})", path=None, overrides=list(overrides), status="not started")
                job.problems.append("no job dir yet")
                jobs.append(job)
    return jobs
