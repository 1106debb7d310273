"""Run an ablation grid in its sweep directory: validate, check the directory, launch what is left.

Everything that can be wrong with the grid is found before anything is written: a bad LR grid or
seed count, an unknown arm, a job the schema refuses, a sweep directory holding another grid. Each
is one line on stderr and exit 2. Then every job left goes to the launcher in one call (side by
side under the slots launcher, one array under submitit), each with its own job number (so its
directory is `<sweep dir>/<number>` whether or not the jobs before it ran this time): a finished
job is skipped without touching its files, an interrupted one is re-launched with
`ckpt_path=<its last.ckpt>` and the sweep's original wandb group. A job that crashes does not stop
the others; the report lists it.
"""

from __future__ import annotations

import json
import logging
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from hydra.core.utils import JobStatus
from omegaconf import DictConfig, OmegaConf, open_dict

from gptlab.ablation.budgets import BRANCH_FROM, BUDGET_DERIVED, BudgetError, budget_plan, budget_steps
from gptlab.ablation.grid import (
    LR_KEY,
    SEED_KEY,
    Grid,
    GridError,
    Ladder,
    build_grid,
    lr_values,
    seed_values,
)
from gptlab.ablation.sweep_dir import (
    DONE,
    RESUME,
    config_conflict,
    conflict,
    job_state,
    read_record,
    record_failure,
    write_record,
)

log = logging.getLogger("gptlab")
SUBDIR = "${hydra.job.num}"


def fail(message: str) -> None:
    """One line on stderr, exit 2: the sweep's input was wrong and nothing was started."""
    print(f"error: {' '.join(message.split())}", file=sys.stderr, flush=True)
    sys.exit(2)


def _parse_cli(sweeper: Any, arguments: list[str]) -> list[tuple[str, list[str], bool]]:
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create(config_loader=sweeper.hydra_context.config_loader)
    out = []
    for o in parser.parse_overrides(arguments):
        key = o.get_key_element()
        if o.is_sweep_override():
            out.append((key, [str(v) for v in o.sweep_string_iterator()], True))
        else:
            out.append((key, [o.get_value_element_as_str()], False))
    return out


def _params(sweeper: Any) -> dict[str, list[str]]:
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create(config_loader=sweeper.hydra_context.config_loader)
    params = sweeper.spec["params"] or {}
    parsed = parser.parse_overrides([f"{k}={v}" for k, v in params.items()])
    # a single value (ablate_init_quick's `model.n_layer: "1"`) is a cell of one, not a sweep
    return {
        o.get_key_element(): (
            [str(v) for v in o.sweep_string_iterator()]
            if o.is_sweep_override()
            else [o.get_value_element_as_str()]
        )
        for o in parsed
    }


def make_grid(sweeper: Any, arguments: list[str]) -> Grid:
    """The grid from hydra.sweeper.* and the command line; GridError names the bad field."""
    spec = sweeper.spec
    loader = sweeper.hydra_context.config_loader

    def options(key: str) -> list[str] | None:
        found = list(loader.get_group_options(key.lstrip("+~"))) if "." not in key else []
        return found or None  # a field (model.depth_scaled_init) is checked by the schema instead

    ladder = _with_width(_ladder(spec.get("ladder")), sweeper.config)
    grid = build_grid(
        arm=spec["arm"],
        arms=spec["arms"],
        baseline=spec["baseline"],
        lrs=lr_values(spec["lr"].min, spec["lr"].max, spec["lr"].points),
        seeds=seed_values(spec["seeds"]),
        params=_params(sweeper),
        cli=_parse_cli(sweeper, arguments),
        group_options=options,
        ladder=ladder,
        tokens_per_step=_tokens_per_step(sweeper.config) if ladder is not None else 1,
        budgets=bool(spec.get("budgets")),
    )
    if spec.get("budgets"):
        grid = with_budgets(grid, spec, sweeper.config)
    if grid.ladder_key and len(grid.cells[grid.ladder_key]) < 3:
        log.warning(
            "a ladder of %d sizes: the report compares each rung but fits no curve (it needs 3)",
            len(grid.cells[grid.ladder_key]),
        )
    return grid


def with_budgets(grid: Grid, spec: dict[str, Any], config: DictConfig) -> Grid:
    """The grid as trunks and branches (gptlab.ablation.budgets); GridError names the bad field."""
    given = [o.split("=", 1)[0] for o in grid.fixed] + list(grid.cells)
    clash = [k for k in given if k.lstrip("+~") in BUDGET_DERIVED]
    if clash:
        raise GridError(
            f"{clash[0]} is not accepted in a sweep over hydra.sweeper.budgets: the budgets set it per job "
            "(a trunk runs optim.schedule=wsd optim.decay_steps=0, each branch its own decay)"
        )
    try:
        steps = budget_steps(spec["budgets"], _tokens_per_step(config))
        plan = budget_plan(steps, spec["decay_fraction"], int(config.optim.warmup_steps))
    except BudgetError as err:
        raise GridError(str(err)) from None
    sweep_dir = str(Path(str(config.hydra.sweep.dir)).resolve())
    return replace(grid, budgets=[list(p) for p in plan], sweep_dir=sweep_dir)


def _ladder(conf: Any) -> Ladder | None:
    """hydra.sweeper.ladder as a Ladder (None: no widths, no ladder)."""
    if conf is None or not (conf.get("widths") or conf.get("depths")):
        return None
    values = OmegaConf.to_container(conf, resolve=True)
    assert isinstance(values, dict)
    return Ladder(**{str(k): v for k, v in values.items()})


def _with_width(ladder: Ladder | None, config: DictConfig) -> Ladder | None:
    """A depth ladder keeps the preset's width: model.n_embd of the composed config."""
    if ladder is None or not ladder.depths:
        return ladder
    return replace(ladder, width=int(config.model.n_embd))


def _tokens_per_step(config: DictConfig) -> int:
    """Tokens one optimizer step trains on, per device: batch × block × gradient accumulation
    (several devices multiply it; the ladder's budget is then per device, as on CPU)."""
    return (
        int(config.data.batch_size)
        * int(config.model.block_size)
        * int(config.trainer.accumulate_grad_batches)
    )


def check_jobs_compose(sweeper: Any, grid: Grid) -> dict[str, Any]:
    """Compose and schema-check one job per (cell, arm): a value the schema refuses (an unknown
    arm of a field, say) fails here in one line rather than in every job of the sweep. Returns
    each (cell, arm)'s composed config (seed and LR left out), for the sweep dir's record."""
    configs: dict[str, Any] = {}
    for job in grid.jobs():  # LR and seed were checked already: one job per (cell, arm) is enough
        skip = (f"{SEED_KEY}=", f"{LR_KEY}=", f"{BRANCH_FROM}=")  # a branch's trunk: one per seed and LR
        identity = " ".join(o for o in job if not o.startswith(skip))
        if identity in configs:
            continue
        try:
            cfg = sweeper.hydra_context.config_loader.load_sweep_config(sweeper.config, list(job))
            with open_dict(cfg):
                del cfg["hydra"]
            OmegaConf.to_object(cfg)
        except Exception as err:  # noqa: BLE001 - any refusal is the grid's input error
            fail(f"the grid's job [{' '.join(job)}] is not accepted: {str(err).splitlines()[0]}")
        container = OmegaConf.to_container(cfg, resolve=False)
        for key in (SEED_KEY, "ckpt_path", BRANCH_FROM):
            container.pop(key, None)  # type: ignore[union-attr]
        container.get("optim", {}).pop("lr", None)  # type: ignore[union-attr]
        configs[identity] = json.loads(json.dumps(container, default=str))  # as ablation.json holds it
    return configs


def sweep_group(config: DictConfig) -> str | None:
    """The wandb group the sweep config resolves to (one ${now} per sweep)."""
    try:
        group = OmegaConf.select(config, "logger.group")
    except Exception:  # noqa: BLE001
        return None
    return None if group is None else str(group)


def run_grid(sweeper: Any, arguments: list[str]) -> list[Any]:
    """Validate, check the sweep dir, record the grid, launch the jobs not done (the sweeper then
    writes the report: reporting is analysis, a layer above this package)."""
    config = sweeper.config
    try:
        grid = make_grid(sweeper, arguments)
    except GridError as err:
        fail(str(err))
    if OmegaConf.to_container(config.hydra.sweep, resolve=False).get("subdir") != SUBDIR:
        fail(f"hydra.sweep.subdir must stay {SUBDIR} for the ablation sweeper (a job's dir is its number)")
    jobs = grid.jobs()
    configs = check_jobs_compose(sweeper, grid)
    sweep_dir = Path(str(config.hydra.sweep.dir))
    record = read_record(sweep_dir)
    problem = conflict(sweep_dir, jobs) or config_conflict(sweep_dir, record, configs)
    if problem:
        fail(problem)
    group = sweep_group(config)
    original = record.get("group") if record else group
    left = jobs_left(sweep_dir, jobs, original if original != group else None)
    check = getattr(sweeper.launcher, "check_jobs", None)  # the slots launcher: GPUs, slots, devices
    if left and callable(check):
        check([job for _, job in left])
    sweep_dir.mkdir(parents=True, exist_ok=True)
    OmegaConf.save(config, sweep_dir / "multirun.yaml")
    write_record(sweep_dir, grid, original, configs)
    if not left:
        return [[]]
    if not grid.budgets:
        return [launch(sweeper, sweep_dir, left)]
    # budgets: every trunk first (one call), then every branch whose checkpoint is there (a second)
    n_trunks = len(grid.plain_jobs())
    trunks = [(k, job) for k, job in left if k < n_trunks]
    results = [launch(sweeper, sweep_dir, trunks)] if trunks else []
    ready = []
    for k, job in left[len(trunks) :]:
        missing = branch_without_checkpoint(job)
        if missing:
            log.error("job %d not started: %s", k, missing)
            record_failure(sweep_dir / str(k), missing)
        else:
            ready.append((k, job))
    return results + ([launch(sweeper, sweep_dir, ready)] if ready else [])


def launch(sweeper: Any, sweep_dir: Path, left: list[tuple[int, list[str]]]) -> list[Any]:
    """Every job of `left` in one call, so a parallel launcher runs them side by side and submitit
    submits them as one array. Launchers number a call's jobs consecutively;
    `hydra.sweep.subdir=<k>` keeps each job in its own numbered directory when finished jobs leave gaps."""
    results = sweeper.launcher.launch([job for _, job in left], initial_job_idx=left[0][0])
    for (k, _), ret in zip(left, results, strict=True):
        if ret.status == JobStatus.FAILED:  # a crash stays local: the report lists it, the sweep goes on
            reason = one_line(ret._return_value)
            log.error("job %d failed: %s", k, reason)
            record_failure(sweep_dir / str(k), reason)  # killed outright: metrics.json still "running"
    return list(results)


def branch_without_checkpoint(job: list[str]) -> str | None:
    """Why a branch job cannot start (its trunk saved no checkpoint at its point), or None."""
    values = dict(o.split("=", 1) for o in job if "=" in o)
    trunk, at = Path(values[BRANCH_FROM]), values["branch.at"]
    if (trunk / "checkpoints" / f"branch_{at}.ckpt").is_file():
        return None
    return f"its trunk {trunk} has no checkpoints/branch_{at}.ckpt (the trunk failed or stopped early)"


def jobs_left(sweep_dir: Path, jobs: list[list[str]], group: str | None) -> list[tuple[int, list[str]]]:
    """(number, overrides) of every job not finished: interrupted ones with `ckpt_path=<last.ckpt>`,
    all with their directory pinned and, on a re-run, the sweep's original wandb group."""
    left = []
    for k, job in enumerate(jobs):
        state, ckpt = job_state(sweep_dir / str(k))
        if state == DONE:
            log.info("job %d finished in an earlier run of this sweep: skipped", k)
            continue
        extra = [f"ckpt_path='{ckpt}'"] if state == RESUME else []
        if group is not None:
            extra.append(f"logger.group='{group}'")
        if extra:
            log.info("job %d: re-launched with %s", k, " ".join(extra))
        left.append((k, [*job, *extra, f"hydra.sweep.subdir={k}"]))
    return left


def one_line(err: object) -> str:
    return " ".join(str(err).split())[:300] or type(err).__name__


def sweep_group_of_record(sweep_dir: Path, config: Any) -> str | None:
    """The wandb group the sweep's jobs log to: the one recorded when the sweep first ran."""
    record = read_record(sweep_dir)
    return record.get("group") if record else sweep_group(config)
