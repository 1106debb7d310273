"""From a sweep or run directory on disk to what the view needs: the runs' shape and the target.

A sweep dir holds ablation.json (the ablation sweeper) or multirun.yaml and numbered job dirs; a run
dir holds .hydra/config.yaml. The group comes from ablation.json (the one every job logged to), else
the jobs' wandb run ids are the run set. Nothing here needs a network.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from gptlab.dashboards.keys import RunShape, read_config, shape_of
from gptlab.dashboards.view import Target, verdict_markdown


class NotBuildable(ValueError):
    """The directory cannot give a view: one line naming what is wrong and what is accepted."""


def merge(shapes: list[RunShape]) -> RunShape:
    """The shape of a group of runs: every key that some run logs (an untied arm logs the head).
    A flag is on when it is on in some run; a list of names (telemetry groups, DyT sites, tasks) is
    the union of the runs' lists, in first-seen order."""
    fields: dict[str, object] = {}
    for f in dataclasses.fields(RunShape):
        values = [getattr(s, f.name) for s in shapes]
        if values and isinstance(values[0], tuple):
            fields[f.name] = tuple(dict.fromkeys(x for v in values for x in v))
        else:
            fields[f.name] = any(values)
    return RunShape(**fields)  # type: ignore[arg-type]


def previous_wandb_id(run_dir: Path) -> str | None:
    """The id of the newest wandb run in `run_dir` (as training.loggers reads it; not imported from
    there: that module imports Lightning, 10-30 s, which building a view never needs)."""
    files = sorted((run_dir / "wandb").glob("*run-*/run-*.wandb"), key=lambda p: p.stat().st_mtime)
    return files[-1].stem.removeprefix("run-") if files else None


def job_dirs(sweep: Path) -> list[Path]:
    dirs = [d for d in sweep.iterdir() if d.is_dir() and d.name.isdigit() and (d / ".hydra").is_dir()]
    return sorted(dirs, key=lambda d: int(d.name))


def arm_of(job_dir: Path, arm_key: str) -> str | None:
    """The job's value of the sweep's arm key, from the overrides Hydra recorded for it."""
    from gptlab.ablation.sweep_dir import job_overrides  # a sweep's: a single run's view never needs it

    for override in job_overrides(job_dir) or []:
        key, _, value = override.partition("=")
        if key.lstrip("+~") == arm_key:
            return value
    return None


def failed_jobs(dirs: list[Path]) -> list[str]:
    """Jobs whose metrics.json says failed for another reason than divergence (a result)."""
    bad = []
    for d in dirs:
        try:
            m = json.loads((d / "metrics.json").read_text())
        except (OSError, ValueError):
            continue
        if isinstance(m, dict) and m.get("status") == "failed" and not m.get("diverged"):
            bad.append(d.name)
    return bad


def load(path: str | Path, entity: str | None, project: str | None, allow_failed: bool = False):
    """(shape, target, the dir the view file goes to) for a sweep or run dir."""
    root = Path(path)
    if not root.is_dir():
        raise NotBuildable(f"{str(root)!r} is not a directory; give a sweep dir or a run dir")
    is_run = (root / ".hydra" / "config.yaml").is_file()
    is_sweep = (root / "ablation.json").is_file() or (root / "multirun.yaml").is_file()
    if not (is_run or is_sweep):
        raise NotBuildable(
            f"{str(root)!r} is neither a sweep dir (ablation.json or multirun.yaml) nor a run dir "
            "(.hydra/config.yaml); give the dir a `train.py` run or sweep wrote"
        )
    dirs = [root] if is_run else job_dirs(root)
    bad = failed_jobs(dirs)
    if bad and not allow_failed:
        raise NotBuildable(
            f"{str(root)!r} has failed job(s) {', '.join(bad)} (metrics.json status failed); re-run them, "
            "or give allow_failed=true to build the view of the others"
        )
    logged = [d for d in dirs if previous_wandb_id(d)]
    if not logged:
        raise NotBuildable(
            f"{str(root)!r}: no job logged to wandb (empty group: no wandb/ run dir in any job; "
            "was logger.wandb=false or logger=csv?); run the sweep with wandb on"
        )
    configs = [read_config(d) for d in logged]  # each read once
    shape = merge([shape_of(d, c) for d, c in zip(logged, configs, strict=True)])
    cfg = configs[0]
    logger = cfg.get("logger") or {}
    record = None
    if not is_run:  # the sweeper's record, imported here: a run's end (train.py) reads none
        from gptlab.ablation.sweep_dir import read_record

        record = read_record(root)
    target = Target(
        entity=entity or logger.get("entity") or "",
        project=project or logger.get("project") or "gptlab",
        name=f"gptlab {root.name}",
    )
    if record:
        target.group = record.get("group")
        target.arm_key = record.get("arm")
        target.arms = [str(a) for a in record.get("arms", [])]
        target.ladder_key = record.get("ladder_key")
        target.budgets = [int(b[0]) for b in record.get("budgets") or []]
        target.name = f"gptlab sweep {target.group or root.name}"
        figures = sorted((root / "figures").glob("*.png"))
        target.report_keys = [f"report/{p.stem}" for p in figures]
        target.verdict_md = verdict_markdown(root / "report.md")
        if target.arm_key:  # each job's run gets its arm's color (the summary run has no arm)
            arms = {str(previous_wandb_id(d)): arm_of(d, target.arm_key) for d in logged}
            target.run_arms = {rid: arm for rid, arm in arms.items() if arm is not None}
    if not target.group:
        target.run_ids = [str(previous_wandb_id(d)) for d in logged]
    return shape, target, root
