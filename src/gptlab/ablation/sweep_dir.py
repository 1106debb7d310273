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


def write_record(
    sweep_dir: Path, grid: Grid, group: str | None, configs: dict[str, Any] | None = None
) -> None:
    """ablation.json: the grid (arm, baseline, LR grid, seeds, cells), the wandb group, the job list,
    and each (cell, arm)'s composed config (what a resume must still compose to)."""
    sweep_dir.mkdir(parents=True, exist_ok=True)
    data = {**asdict(grid), "group": group, "jobs": grid.jobs(), "configs": configs or {}}
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


def first_difference(old: Any, new: Any, path: str = "") -> tuple[str, Any, Any] | None:
    """The first dotted key where two config trees differ, with both values (None: equal)."""
    if isinstance(old, dict) and isinstance(new, dict):
        for key in list(old) + [k for k in new if k not in old]:
            found = first_difference(old.get(key, "<absent>"), new.get(key, "<absent>"), f"{path}{key}.")
            if found:
                return found
        return None
    return None if old == new else (path.rstrip("."), old, new)


def config_conflict(sweep_dir: Path, record: dict[str, Any] | None, configs: dict[str, Any]) -> str | None:
    """Why this grid's jobs may not continue in `sweep_dir` although their overrides match: a job
    composes to another config than when the sweep started (a preset or a default was edited), so
    the finished jobs would be mixed with jobs of a different experiment. None when all agree.
    `configs`: (cell, arm) → composed config in JSON form (launch.check_jobs_compose)."""
    old_configs = (record or {}).get("configs") or {}
    for identity, new in configs.items():
        if identity not in old_configs:
            continue
        diff = first_difference(old_configs[identity], new)
        if diff:
            key, was, now = diff
            return (
                f"hydra.sweep.dir={sweep_dir} holds jobs composed from another config: for "
                f"[{identity}] {key} was {was!r} and is now {now!r} (a preset or default changed "
                "since the sweep started); give a new hydra.sweep.dir"
            )
    return None


def read_metrics(job_dir: Path) -> dict[str, Any]:
    """A job's metrics.json, or {} when it is missing, unreadable or cut short by a kill."""
    try:
        status = json.loads((job_dir / "metrics.json").read_text())
    except (OSError, ValueError):
        return {}
    return status if isinstance(status, dict) else {}


def job_state(job_dir: Path) -> tuple[str, Path | None]:
    """(DONE | RESUME | FRESH, checkpoint to resume from).

    Done: metrics.json says finished, or failed because training diverged (a non-finite step under
    on_nonfinite=stop is the result of that LR, and re-running it would diverge again). Resume: any
    other state with a last.ckpt (preempted by SIGTERM, killed outright, crashed). Fresh: the rest.
    """
    status = read_metrics(job_dir)
    if status.get("status") == "finished":
        return DONE, None
    if status.get("status") == "failed" and status.get("diverged"):
        return DONE, None
    ckpt = job_dir / "checkpoints" / "last.ckpt"
    if ckpt.is_file():
        return RESUME, ckpt.resolve()
    return FRESH, None


def record_failure(job_dir: Path, reason: str) -> bool:
    """A job the launcher reports failed whose metrics.json still says "running" (or is missing or
    cut short): it was killed before it could write how it ended (SIGKILL, the OOM killer, a node
    lost). Record it as failed with the launcher's reason, so the sweep and its report count it.
    A richer record (failed, preempted, finished) is left as it is. True when written."""
    status = read_metrics(job_dir)
    if status.get("status") not in (None, "running"):
        return False
    path = job_dir / "metrics.json"
    job_dir.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps({**status, "status": "failed", "error": reason}, indent=2))
    os.replace(tmp, path)
    return True
