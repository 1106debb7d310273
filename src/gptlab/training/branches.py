"""Decay branches (docs/optim.md, "Warmup-stable-decay and branches"): a trunk saves a full checkpoint
at each branch point, and `branch_from=<trunk> branch.at=<step> optim.decay_steps=<d>` resumes one
of them in its own run directory as a WSD run of at + d steps that decays over its last d.

A branch is Lightning's resume from that checkpoint (model, optimizer, LR scheduler with its step
count, loop counters: the data position is the global step, RNG states: callbacks/rng.py) under the
branch's own schedule (schedules.apply_schedule sets the first step's LR). So the branch from step s
with decay d is the single WSD run of s + d steps with the same seed, bit for bit
(tests/training/test_wsd_branches.py). Every WSD run writes wsd.json (its composed config, name,
wandb group and branch points): what a branch checks the trunk against, refusing in one line.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import lightning as L

from gptlab.config import TrainConfig
from gptlab.training.callbacks.summary import write_json_atomic
from gptlab.wsd import branch_point_value, check_wsd

RECORD = "wsd.json"
# keys a branch may hold differently from its trunk: where files are and how they are read, and the
# decay itself; every other key of the model, data and optim sections, the seed and the accumulation
# would make the branch another run than the trunk's continuation
MAY_DIFFER = {
    "data": {"cache_dir", "num_proc", "num_workers"},
    "model": {"activation_checkpointing", "activation_checkpointing_every"},
    "optim": {"schedule", "decay_steps", "decay_fraction", "decay_shape", "min_lr", "branch_points"},
}


def checkpoint_name(step: int) -> str:
    return f"branch_{step}.ckpt"


def resolve_points(cfg: TrainConfig, world_size: int) -> list[dict[str, int]]:
    """The trunk's branch points as {"step", "tokens"}: a token count is the first step whose
    tokens seen reach it (steps × batch_size × block_size × accumulation × ranks), sorted, once each."""
    per_step = cfg.data.batch_size * cfg.model.block_size * cfg.trainer.accumulate_grad_batches * world_size
    steps = set()
    for point in cfg.optim.branch_points:
        kind, n = branch_point_value(point)
        steps.add(n if kind == "step" else math.ceil(n / per_step))
    late = [s for s in sorted(steps) if s > cfg.trainer.max_steps]
    if late:
        raise ValueError(
            f"optim.branch_points reaches step {late[0]} (at {per_step} tokens a step), past "
            f"trainer.max_steps={cfg.trainer.max_steps}; give points inside the trunk"
        )
    return [{"step": s, "tokens": s * per_step} for s in sorted(steps)]


def prepare_branch(cfg: TrainConfig, composed: dict[str, Any]) -> tuple[TrainConfig, dict[str, Any] | None]:
    """A branch's config (ckpt_path the trunk's checkpoint, or the branch's own to resume it;
    max_steps = at + d; the trunk's WSD schedule) and its record for metrics.json and the loggers;
    (cfg, None) for any other run.
    Every refusal is one line, raised before anything is written."""
    at = cfg.branch.at
    if cfg.branch_from is None:
        if at is not None:
            raise ValueError("branch.at is read only with branch_from=<trunk run dir>; give both or neither")
        return cfg, None
    trunk = Path(cfg.branch_from)
    if at is None:
        raise ValueError(
            f"branch_from={str(trunk)!r} needs branch.at=<step>, one of the trunk's branch points"
        )
    record = read_record(trunk)
    t_optim = record["config"].get("optim", {})
    if t_optim.get("schedule") != "wsd" or t_optim.get("decay_steps") != 0:
        raise ValueError(
            f"branch_from={str(trunk)!r} decayed (optim.schedule={t_optim.get('schedule')}, "
            f"decay_steps={t_optim.get('decay_steps')}, decay_fraction={t_optim.get('decay_fraction')}): "
            "a branch starts from a trunk's held LR; train the trunk with optim.schedule=wsd "
            "optim.decay_steps=0"
        )
    ckpt = trunk / "checkpoints" / checkpoint_name(at)
    if not ckpt.is_file():
        points = [p["step"] for p in record.get("branch_points", [])]
        raise ValueError(
            f"branch.at={at} has no checkpoint in {str(trunk)!r} (no checkpoints/{ckpt.name}); "
            f"the trunk's branch points: {points} (a running trunk saves each when it gets there)"
        )
    check_same_run(composed, record["config"], trunk)
    d = cfg.optim.decay_steps
    if d is None or d < 1 or cfg.optim.decay_fraction is not None:
        raise ValueError(
            f"a branch takes optim.decay_steps=<d>, an integer >= 1 (got decay_steps={d}, "
            f"decay_fraction={cfg.optim.decay_fraction}): it runs branch.at + d steps"
        )
    optim = dataclasses.replace(cfg.optim, schedule="wsd", branch_points=[])
    trainer = dataclasses.replace(cfg.trainer, max_steps=at + d)
    check_wsd(optim, trainer.max_steps)
    branch = {"trunk": str(trunk.resolve()), "trunk_name": record["name"], "at": at, "decay_steps": d}
    branch["group"] = record.get("group") or record["name"]
    # ckpt_path with branch_from: an interrupted branch resumes its own last.ckpt (the checks above hold)
    cfg = dataclasses.replace(cfg, optim=optim, trainer=trainer, ckpt_path=cfg.ckpt_path or str(ckpt))
    return cfg, branch


def read_record(trunk: Path) -> dict[str, Any]:
    path = trunk / RECORD
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        raise ValueError(
            f"branch_from={str(trunk)!r} is not a trunk's run dir (no readable {RECORD}); a trunk is a "
            "run of optim.schedule=wsd optim.decay_steps=0 optim.branch_points=[...]"
        ) from None


def check_same_run(branch: dict[str, Any], trunk: dict[str, Any], where: Path) -> None:
    """The branch's composed model, data and optim sections, seed and accumulation against the
    trunk's (MAY_DIFFER aside): the first difference, in one line."""
    pairs = []
    for s in ("model", "data", "optim"):
        mine, theirs = branch.get(s) or {}, trunk.get(s) or {}
        keys = sorted(k for k in set(mine) | set(theirs) if k not in MAY_DIFFER[s])
        pairs += [(f"{s}.{k}", mine.get(k), theirs.get(k)) for k in keys]
    pairs.append(("seed", branch.get("seed"), trunk.get("seed")))
    accumulate = "accumulate_grad_batches"
    pairs.append(
        (f"trainer.{accumulate}", branch["trainer"].get(accumulate), trunk["trainer"].get(accumulate))
    )
    for key, mine, theirs in pairs:
        if mine != theirs:
            raise ValueError(
                f"{key}={mine!r} but the trunk {str(where)!r} has {key}={theirs!r}: a branch continues "
                "its trunk's run; give the trunk's settings (its wsd.json 'config')"
            )


def write_record(run_dir: Path, composed: dict[str, Any], name: str, group: str | None, points: list) -> None:
    """wsd.json: what a branch of this run checks (rank 0 writes it, at the start)."""
    write_json_atomic(
        run_dir / RECORD, {"name": name, "group": group, "config": composed, "branch_points": points}
    )


class BranchPointCheckpoints(L.Callback):
    """Saves checkpoints/branch_<step>.ckpt once the trunk's step `step` is done: at the first batch
    end that sees that global step (right after its optimizer and scheduler steps, where
    ModelCheckpoint's every-n-steps save happens; all ranks: a collective). A resumed trunk keeps
    the ones it already saved (written atomically: a file there is whole)."""

    def __init__(self, run_dir: Path, steps: list[int]) -> None:
        self.dir, self.steps = Path(run_dir) / "checkpoints", set(steps)
        self.done: set[int] = set()

    def on_fit_start(self, trainer: L.Trainer, pl_module: Any) -> None:
        self.done = {s for s in self.steps if (self.dir / checkpoint_name(s)).is_file()}

    def on_train_batch_end(
        self, trainer: L.Trainer, pl_module: Any, outputs: Any, batch: Any, i: int
    ) -> None:
        step = trainer.global_step
        if step in self.steps and step not in self.done:
            self.done.add(step)
            trainer.save_checkpoint(self.dir / checkpoint_name(step))
