"""What a sweep directory already holds: its grid record, and the state of each job in it.

The sweeper reads this before it writes anything, so a re-run of the same command skips what is
done and resumes what was interrupted, and a different grid pointed at the same directory is
refused instead of overwriting jobs that belong to another question.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path
from typing import Any

import yaml

from gptlab.ablation.grid import Grid, grid_identity

RECORD = "ablation.json"
DONE, RESUME, FRESH = "done", "resume", "fresh"


def read_record(sweep_dir: Path) -> dict[str, Any] | None:
    """The grid record a previous run of this sweep wrote, or None."""
    path = sweep_dir / RECORD
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def write_record(sweep_dir: Path, grid: Grid, group: str | None) -> None:
    """ablation.json: the grid (arm, baseline, LR grid, seeds, cells), the wandb group, the job list."""
    sweep_dir.mkdir(parents=True, exist_ok=True)
    data = {**asdict(grid), "group": group, "jobs": grid.jobs()}
    tmp = sweep_dir / (RECORD + ".tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    os.replace(tmp, sweep_dir / RECORD)


def job_overrides(job_dir: Path) -> list[str] | None:
    """The overrides Hydra recorded for a job directory (None: no readable record)."""
    path = job_dir / ".hydra" / "overrides.yaml"
    try:
        return [str(o) for o in (yaml.safe_load(path.read_text()) or [])]
    except (OSError, yaml.YAMLError):
        return None


def conflict(sweep_dir: Path, jobs: list[list[str]]) -> str | None:
    """Why `jobs` may not run in `sweep_dir` (one line), or None when it holds this grid or a prefix
    of it (same jobs, same numbers; more seeds appended) or nothing yet."""
    where = f"hydra.sweep.dir={sweep_dir}"
    planned = [grid_identity(j) for j in jobs]
    record = read_record(sweep_dir)
    if record is not None:
        old = [grid_identity(j) for j in record.get("jobs", [])]
        if old != planned[: len(old)]:
            k = next((i for i, (a, b) in enumerate(zip(old, planned, strict=False)) if a != b), len(planned))
            had = " ".join(old[k]) if k < len(old) else "(none)"
            now = " ".join(planned[k]) if k < len(planned) else "(none: the new grid is smaller)"
            return (
                f"{where} holds another grid: its job {k} is [{had}], this grid's is [{now}]; "
                "give a new hydra.sweep.dir"
            )
    for d in (
        sorted(p for p in sweep_dir.iterdir() if p.is_dir() and p.name.isdigit())
        if sweep_dir.is_dir()
        else []
    ):
        found = job_overrides(d)
        if found is None:
            continue
        k = int(d.name)
        if k >= len(planned) or grid_identity(found) != planned[k]:
            now = " ".join(planned[k]) if k < len(planned) else "(no such job in this grid)"
            return (
                f"{where} holds job {k} of a different grid ([{' '.join(grid_identity(found))}], this grid's "
                f"job {k} is [{now}]); give a new hydra.sweep.dir"
            )
    return None


def job_state(job_dir: Path) -> tuple[str, Path | None]:
    """(DONE | RESUME | FRESH, checkpoint to resume from).

    Done: metrics.json says finished, or failed because training diverged (a non-finite step under
    on_nonfinite=stop is the result of that LR, and re-running it would diverge again). Resume: any
    other state with a last.ckpt (preempted by SIGTERM, killed outright, crashed). Fresh: the rest.
    """
    metrics = job_dir / "metrics.json"
    try:
        status = json.loads(metrics.read_text())
    except (OSError, ValueError):
        status = {}
    if isinstance(status, dict):
        if status.get("status") == "finished":
            return DONE, None
        if status.get("status") == "failed" and status.get("diverged"):
            return DONE, None
    ckpt = job_dir / "checkpoints" / "last.ckpt"
    if ckpt.is_file():
        return RESUME, ckpt.resolve()
    return FRESH, None
