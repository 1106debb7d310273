"""The grid of an ablation: arms × a log-spaced LR grid × seeds, crossed with any further swept keys.

Pure: no Hydra runtime, so the report can rebuild the same job list from the sweep's record. The
job order is fixed: seed outermost, then the further keys (the cells), then the arm, then the LR.
Seed outermost means an interrupted sweep has every arm and LR at seed 1 first, and a grid grown by
more seeds keeps every old job at its old number (`hydra.sweep.dir` can be re-used for it).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

LR_KEY = "optim.lr"
SEED_KEY = "seed"
# Overrides the sweeper adds to a re-launched job (resume from its checkpoint, keep the sweep's wandb
# group); they say how a job was run, not which job it is.
RESUME_KEYS = ("ckpt_path", "logger.group")


class GridError(ValueError):
    """A bad grid: the message is one line naming the field."""


@dataclass(frozen=True)
class Grid:
    """Everything that decides the job list, as override strings."""

    arm: str  # the override key whose values are the arms: a config group (model/ffn) or a field
    arms: list[str]
    baseline: str
    lrs: list[str]
    seeds: list[str]
    cells: dict[str, list[str]] = field(default_factory=dict)  # further swept keys
    fixed: list[str] = field(default_factory=list)  # the command line's other overrides, every job

    def dims(self) -> list[tuple[str, list[str]]]:
        return [(SEED_KEY, self.seeds), *self.cells.items(), (self.arm, self.arms), (LR_KEY, self.lrs)]

    def jobs(self) -> list[list[str]]:
        """One override list per job, in the fixed order (job number = index)."""
        dims = self.dims()
        return [
            [f"{k}={v}" for (k, _), v in zip(dims, combo, strict=True)] + list(self.fixed)
            for combo in itertools.product(*(values for _, values in dims))
        ]


def log_grid(low: float, high: float, points: int) -> list[float]:
    """`points` learning rates evenly spaced in log between low and high (both included)."""
    if points == 1:
        return [low]
    return [low * (high / low) ** (i / (points - 1)) for i in range(points)]


def format_lr(value: float) -> str:
    """Three significant digits: readable job names, and a grid step far larger than the rounding."""
    return f"{value:.3g}"


def _positive_number(field_name: str, value: object) -> float:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if not ok or not math.isfinite(float(value)) or float(value) <= 0:  # type: ignore[arg-type]
        raise GridError(
            f"{field_name}={value!r} is not accepted; a learning rate must be a finite number > 0"
        )
    return float(value)  # type: ignore[arg-type]


def lr_values(low: object, high: object, points: object) -> list[str]:
    """The configured LR grid (hydra.sweeper.lr.*), validated, as override strings."""
    lo = _positive_number("hydra.sweeper.lr.min", low)
    hi = _positive_number("hydra.sweeper.lr.max", high)
    if isinstance(points, bool) or not isinstance(points, int) or points < 1:
        raise GridError(f"hydra.sweeper.lr.points={points!r} is not accepted; give an integer >= 1")
    if lo > hi:
        raise GridError(f"hydra.sweeper.lr.min={low!r} is above hydra.sweeper.lr.max={high!r}")
    values = [format_lr(v) for v in log_grid(lo, hi, points)]
    if len(set(values)) != len(values):
        raise GridError(f"hydra.sweeper.lr.points={points} is too many for [{low}, {high}] at 3 digits")
    return values


def seed_values(count: object) -> list[str]:
    """Seeds 1..count (hydra.sweeper.seeds)."""
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise GridError(
            f"hydra.sweeper.seeds={count!r} is not accepted; give the number of seeds, an integer >= 1"
        )
    return [str(s) for s in range(1, count + 1)]


def _check_lr_strings(values: Sequence[str]) -> list[str]:
    for v in values:
        try:
            number = float(v)
        except ValueError:
            raise GridError(f"{LR_KEY}={v!r} in the LR grid is not a number") from None
        _positive_number(LR_KEY, number)
    return list(values)


def _check_seed_strings(values: Sequence[str]) -> list[str]:
    for v in values:
        if not v.lstrip("-").isdigit() or int(v) < 0:
            raise GridError(f"{SEED_KEY}={v!r} in the seed list is not accepted; give integers >= 0")
    if not values:
        raise GridError(f"{SEED_KEY}= gives no seed; give at least one")
    return list(values)


def build_grid(
    arm: str,
    arms: Sequence[str],
    baseline: str | None,
    lrs: Sequence[str],
    seeds: Sequence[str],
    params: dict[str, list[str]],
    cli: list[tuple[str, list[str], bool]],
    group_options: Callable[[str], list[str] | None] | None = None,
) -> Grid:
    """The grid from the sweeper's config and the command line (key, values, is-a-sweep).

    A command-line value for the arm key, optim.lr, seed or a swept key replaces that dimension
    (`seed=1,2` runs two seeds); another swept key becomes one more dimension; everything else is
    passed to every job. `group_options(key)` lists a config group's options (None: not a group).
    """
    if not arm:
        raise GridError("hydra.sweeper.arm is not set; name the override key the arms are (e.g. model/ffn)")
    where = {"arm": "hydra.sweeper.arms", "lr": "hydra.sweeper.lr", "seed": "hydra.sweeper.seeds"}
    arm_values, lr_list, seed_list = [str(a) for a in arms], list(lrs), list(seeds)
    cells = {k: list(v) for k, v in params.items()}
    fixed: list[str] = []
    for key, values, is_sweep in cli:
        if key == arm:
            arm_values, where["arm"] = values, key
        elif key == LR_KEY:
            lr_list, where["lr"] = _check_lr_strings(values), key
        elif key == SEED_KEY:
            seed_list, where["seed"] = _check_seed_strings(values), key
        elif key in cells or is_sweep:
            cells[key] = values
        else:
            fixed.append(f"{key}={values[0]}")
    if not arm_values:
        raise GridError(f"{where['arm']} is empty; list the arms to compare")
    if len(set(arm_values)) != len(arm_values):
        raise GridError(f"{where['arm']}={arm_values} names an arm twice")
    options = group_options(arm) if group_options else None
    if options is not None:
        unknown = [a for a in arm_values if a not in options]
        if unknown:
            raise GridError(
                f"{where['arm']}: {unknown[0]!r} is not an option of the config group {arm} "
                f"(options: {', '.join(sorted(options))})"
            )
    base = str(baseline) if baseline is not None else arm_values[0]
    if base not in arm_values:
        raise GridError(f"hydra.sweeper.baseline={base!r} is not one of the arms ({', '.join(arm_values)})")
    return Grid(arm, arm_values, base, lr_list, seed_list, cells, fixed)


def grid_identity(overrides: Sequence[str]) -> list[str]:
    """A job's overrides without the resume-only keys, sorted: what makes two jobs the same job."""
    return sorted(o for o in overrides if o.split("=", 1)[0].lstrip("+~") not in RESUME_KEYS)
