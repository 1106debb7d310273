"""The WSD schedule's settings (optim.schedule=wsd, docs/optim.md): the decay's length, the trunk's
branch points and the one-line checks on them. Plain Python below the config schema, so the schema
validates with it and the sweep status reads a run's length with it, neither importing training."""

from __future__ import annotations

import math
from typing import Any

DECAY_SHAPES = ("linear", "sqrt", "cosine")  # optim.decay_shape


def check_decay_fields(cfg: Any) -> None:
    """The WSD fields' own values (gptlab.training.schedules reads them); how they fit the run's
    length and the schedule is TrainConfig's check (check_wsd), which knows both."""
    steps, fraction = cfg.decay_steps, cfg.decay_fraction
    if steps is not None and (isinstance(steps, bool) or not isinstance(steps, int) or steps < 0):
        raise ValueError(
            f"optim.decay_steps={steps!r} is not accepted; give an integer >= 0 (0: no decay, a trunk)"
        )
    if fraction is not None and not (
        isinstance(fraction, int | float) and not isinstance(fraction, bool) and 0 < fraction <= 1
    ):
        raise ValueError(f"optim.decay_fraction={fraction!r} is not accepted; give a number in (0, 1]")
    if cfg.decay_shape not in DECAY_SHAPES:
        raise ValueError(
            f"optim.decay_shape={cfg.decay_shape!r} is not accepted; choose one of {', '.join(DECAY_SHAPES)}"
        )
    cfg.branch_points = list(cfg.branch_points)  # OmegaConf hands a ListConfig back
    for point in cfg.branch_points:
        branch_point_value(point)


TOKEN_SUFFIXES = {"K": 10**3, "M": 10**6, "G": 10**9, "B": 10**9, "T": 10**12}


def branch_point_value(point: Any) -> tuple[str, int]:
    """("step", n) for an integer, ("tokens", n) for a string such as '2M' or '500K'."""
    if isinstance(point, int) and not isinstance(point, bool) and point >= 1:
        return "step", point
    if isinstance(point, str) and point[-1:].upper() in TOKEN_SUFFIXES:
        try:
            tokens = float(point[:-1]) * TOKEN_SUFFIXES[point[-1].upper()]
        except ValueError:
            tokens = math.nan
        if math.isfinite(tokens) and tokens >= 1:
            return "tokens", math.ceil(tokens)
    raise ValueError(
        f"optim.branch_points has {point!r}, which is not accepted; give steps (integers >= 1) or token "
        "counts with a K, M, G or T suffix (e.g. '2M')"
    )


def wsd_decay_steps(optim: Any, max_steps: int) -> int:
    """The steps optim.schedule=wsd decays over: optim.decay_steps, or decay_fraction × max_steps."""
    if optim.decay_steps is not None:
        return optim.decay_steps
    return round((optim.decay_fraction or 0.0) * max_steps)


def check_wsd(optim: Any, max_steps: int) -> None:
    """One line for a WSD setting that does not fit the run: exactly one of decay_steps and
    decay_fraction under wsd (neither under another schedule), a decay inside the run after the
    warmup, branch points only on a trunk and inside it. (A branch is checked once its length is
    known: gptlab.training.branches.)"""
    given = [n for n in ("decay_steps", "decay_fraction") if getattr(optim, n) is not None]
    if optim.schedule != "wsd":
        if given or optim.branch_points:
            name = given[0] if given else "branch_points"
            raise ValueError(
                f"optim.{name} is read only by optim.schedule=wsd, not {optim.schedule}; "
                "add optim.schedule=wsd or drop it"
            )
        return
    if len(given) != 1:
        raise ValueError(
            "optim.schedule=wsd needs exactly one of optim.decay_steps and optim.decay_fraction, "
            f"{'both were' if given else 'neither was'} given (decay_steps=0: a trunk that never decays)"
        )
    decay = wsd_decay_steps(optim, max_steps)
    if decay + optim.warmup_steps > max_steps:
        raise ValueError(
            f"optim.decay_steps={decay} does not fit the run: with optim.warmup_steps={optim.warmup_steps} "
            f"it needs trainer.max_steps >= {decay + optim.warmup_steps}, not {max_steps}"
        )
    if optim.branch_points and decay != 0:
        raise ValueError(
            f"optim.branch_points needs a trunk, optim.decay_steps=0 (not a decay of {decay} steps): "
            "a branch decays from a point where the LR was still held"
        )
    late = [p for p in optim.branch_points if branch_point_value(p)[0] == "step" and p > max_steps]
    if late:
        raise ValueError(
            f"optim.branch_points has step {late[0]}, past trainer.max_steps={max_steps}; "
            f"give steps in [1, {max_steps}]"
        )


def run_steps(composed: dict[str, Any]) -> int | None:
    """A run's length in optimizer steps from its composed config (.hydra/config.yaml): a decay
    branch's is branch.at + optim.decay_steps (its trainer.max_steps is set when it starts), any
    other run's trainer.max_steps. None when the config does not say."""
    branch = composed.get("branch") or {}
    at, decay = branch.get("at"), (composed.get("optim") or {}).get("decay_steps")
    if composed.get("branch_from") and isinstance(at, int) and isinstance(decay, int):
        return at + decay
    value = (composed.get("trainer") or {}).get("max_steps")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None
