"""Every LR schedule as a LambdaLR factor (a multiplier of optim.lr at each 0-based step), and the
re-application of a run's own schedule after a checkpoint was loaded (a decay branch's LR).

cosine / linear: linear warmup, then a decay over the rest of the run to min_lr; constant: warmup,
then optim.lr. wsd (warmup-stable-decay): warmup, optim.lr held, then a decay over the run's last
decay steps to min_lr, shaped linear, sqrt (1 − sqrt(progress): Hägele et al. 2024, arXiv
2405.18392, "Scaling Laws and Compute-Optimal Training Beyond Fixed Training Durations") or cosine.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from gptlab.config import SCHEDULES, OptimConfig
from gptlab.wsd import wsd_decay_steps

DECAY_SHAPE: dict[str, Callable[[float], float]] = {
    "linear": lambda p: 1.0 - p,
    "sqrt": lambda p: 1.0 - math.sqrt(p),
    "cosine": lambda p: 0.5 * (1.0 + math.cos(math.pi * p)),
}


def lr_factor(cfg: OptimConfig, max_steps: int) -> Callable[[int], float]:
    """Multiplier of cfg.lr at each step: linear warmup, then the schedule's decay to min_lr."""
    if cfg.schedule not in SCHEDULES:
        raise ValueError(
            f"optim.schedule={cfg.schedule!r} is not accepted; choose one of {', '.join(SCHEDULES)}"
        )
    floor = cfg.min_lr / cfg.lr if cfg.lr > 0 else 0.0
    if cfg.schedule == "wsd":
        return wsd_factor(
            cfg.warmup_steps, max_steps, wsd_decay_steps(cfg, max_steps), cfg.decay_shape, floor
        )

    def factor(step: int) -> float:
        if step < cfg.warmup_steps:
            return (step + 1) / cfg.warmup_steps
        if cfg.schedule == "constant" or max_steps <= cfg.warmup_steps:
            return 1.0
        progress = min(1.0, (step - cfg.warmup_steps) / (max_steps - cfg.warmup_steps))
        shape = 0.5 * (1.0 + math.cos(math.pi * progress)) if cfg.schedule == "cosine" else 1 - progress
        return floor + (1.0 - floor) * shape

    return factor


def wsd_factor(warmup: int, max_steps: int, decay: int, shape: str, floor: float) -> Callable[[int], float]:
    """Warmup as the other schedules, 1 until the last `decay` steps, then floor + (1 − floor)·shape(p)
    with p = k/decay at the decay's k-th step (k = 1..decay): its first step is already below the
    held LR and its last is at min_lr, the warmup's mirror. decay = 0: held to the end (a trunk)."""
    start = max_steps - decay
    decay_shape = DECAY_SHAPE[shape]

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        if step < start or decay == 0:  # the trunk: held past its end too
            return 1.0
        progress = min(1.0, (step + 1 - start) / decay)
        return floor + (1.0 - floor) * decay_shape(progress)

    return factor


def apply_schedule(schedulers: list[Any]) -> None:
    """Set each group's LR from this run's own factor at the scheduler's restored step count.

    A checkpoint's optimizer holds the LR its own run had scheduled next; a decay branch resumes a
    trunk's checkpoint under another factor (its decay starts right there), so the first step would
    otherwise run at the trunk's LR. LambdaLR's own expression, so a plain resume is unchanged bit
    for bit (and a fresh run too: step 0 is what LambdaLR set)."""
    for scheduler in schedulers:
        if not isinstance(scheduler, torch.optim.lr_scheduler.LambdaLR):
            continue
        step = scheduler.last_epoch
        groups = scheduler.optimizer.param_groups
        for group, base, fn in zip(groups, scheduler.base_lrs, scheduler.lr_lambdas, strict=True):
            group["lr"] = base * fn(step)
        scheduler._last_lr = [group["lr"] for group in scheduler.optimizer.param_groups]
