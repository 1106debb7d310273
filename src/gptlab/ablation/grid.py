"""The grid of an ablation: arms × a log-spaced LR grid × seeds, crossed with any further swept keys.

Pure: no Hydra runtime, so the report can rebuild the same job list from the sweep's record. The
job order is fixed: seed outermost, then the further keys (the cells), then the arm, then the LR.
Seed outermost means an interrupted sweep has every arm and LR at seed 1 first, and a grid grown by
more seeds keeps every old job at its old number (`hydra.sweep.dir` can be re-used for it).

A *ladder* (`hydra.sweeper.ladder`, `Ladder`) makes the model size a cell: one rung per width, its
depth, heads and token budget derived from the width by the rules below, and its own LR grid (the
best LR moves with size). The LR dimension is then the grid's *index*: job k is the same (seed,
rung, arm, i-th LR) whatever the rungs' values, so numbering and resume work as for a plain grid.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from gptlab.ablation.budgets import expand

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
    # a ladder: the cell key whose values are the rungs (None: no ladder), and per rung value its
    # own LR grid (replacing `lrs`, same length) and the overrides its size rule derives
    ladder_key: str | None = None
    rung_lrs: dict[str, list[str]] = field(default_factory=dict)
    rung_overrides: dict[str, list[str]] = field(default_factory=dict)
    # budgets (gptlab.ablation.budgets): [budget, branch point, decay] in steps per budget, and the
    # sweep dir the branches find their trunks in; no budgets: one job per (seed, cell, arm, LR)
    budgets: list[list[int]] = field(default_factory=list)
    sweep_dir: str | None = None

    def lrs_of(self, cell: dict[str, str]) -> list[str]:
        """The LR grid of a cell: its rung's on a ladder, else the one grid."""
        return self.rung_lrs[cell[self.ladder_key]] if self.ladder_key else self.lrs

    def jobs(self) -> list[list[str]]:
        """One override list per job, in the fixed order (job number = index): with budgets, a
        trunk per plain job, then the branches (gptlab.ablation.budgets)."""
        plain = self.plain_jobs()
        if not self.budgets:
            return plain
        plan = [(b, at, d) for b, at, d in self.budgets]
        return expand(plain, str(self.sweep_dir), plan, len(self.fixed))

    def plain_jobs(self) -> list[list[str]]:
        """One override list per (seed, cell, arm, LR), in the fixed order."""
        keys = [SEED_KEY, *self.cells, self.arm]
        out = []
        for combo in itertools.product(self.seeds, *self.cells.values(), self.arms):
            named = dict(zip(keys, combo, strict=True))
            derived = self.rung_overrides.get(named[self.ladder_key], []) if self.ladder_key else []
            for lr in self.lrs_of(named):
                out.append([f"{k}={v}" for k, v in named.items()] + [f"{LR_KEY}={lr}", *derived, *self.fixed])
        return out


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


LADDER_KEY = "model.n_embd"  # a width ladder's rung is named by its width
DEPTH_KEY = "model.n_layer"  # a depth ladder's by its depth
# what a rung's size rule sets besides the rung's own key: given on the command line too, they would
# fight it
LADDER_DERIVED = ("model.n_layer", "model.n_head", "trainer.max_steps")
DEPTH_DERIVED = ("model.n_head", "trainer.max_steps")


@dataclass(frozen=True)
class Ladder:
    """Model sizes as cells (`hydra.sweeper.ladder`), each rung derived from its width d by rules:

    - depth n_layer = d / aspect and heads n_head = d / head_dim (the shape d/L and the head width
      stay fixed up the ladder, so width and depth grow together); the FFN width follows the arm
      (8/3·d gated, 4·d ungated, conf/model/ffn);
    - size N = 12·n_layer·d², the non-embedding count of the standard block (4d² attention + 8d²
      FFN; Kaplan et al. 2020, Table 1). It orders the rungs (they must increase in N) and sets the
      token budget; the report fits against each job's exact count;
    - token budget: `tokens` per rung (a fixed budget), or `tokens_per_param` × N (Chinchilla's
      20, Hoffmann et al. 2022, or a cheaper ratio); exactly one is set (neither when the ladder
      crosses hydra.sweeper.budgets, which set each job's steps). max_steps = ceil(tokens /
      tokens per step), tokens per step = batch × block × gradient accumulation;
    - LR grid: the sweeper's log grid (hydra.sweeper.lr) is the grid at width `lr_ref_width`; at
      width d every point is multiplied by (lr_ref_width / d) ** lr_width_exponent (the best Adam
      LR falls with width; exponent 1 is μP's 1/width for hidden matrices, Yang et al. 2022, 0 the
      same grid everywhere). Same number of points at every rung, so the job numbering is fixed.

    A *depth* ladder (`depths` instead of `widths`) keeps the preset's width (`width`, filled in
    from model.n_embd) and varies n_layer alone: heads, N, budget and LR grid by the same rules
    (the width rule then gives every rung the same LR grid).
    """

    widths: list[int] = field(default_factory=list)
    aspect: int = 24
    head_dim: int = 24
    lr_ref_width: int = 96
    lr_width_exponent: float = 0.5
    tokens: int | None = None
    tokens_per_param: float | None = None
    depths: list[int] = field(default_factory=list)
    width: int | None = None  # a depth ladder's width (the preset's model.n_embd)

    @property
    def key(self) -> str:
        return DEPTH_KEY if self.depths else LADDER_KEY

    @property
    def derived(self) -> tuple[str, ...]:
        return DEPTH_DERIVED if self.depths else LADDER_DERIVED


@dataclass(frozen=True)
class Rung:
    width: int
    depth: int
    heads: int
    size: int  # N = 12·L·d², the rule's count
    steps: int
    lrs: list[str]


def _positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise GridError(f"{name}={value!r} is not accepted; give an integer >= 1")
    return value


def ladder_rungs(
    ladder: Ladder, base_lrs: Sequence[float], tokens_per_step: int, budgets: bool = False
) -> list[Rung]:
    """The rungs of a ladder (validated; GridError names the field). With `budgets` (a sweep over
    hydra.sweeper.budgets: sizes × budgets, gptlab.ablation.budgets) the budgets set each job's
    steps, so the ladder sets no token budget (steps 0) and must not be given one."""
    where = "hydra.sweeper.ladder"
    if ladder.widths and ladder.depths:
        raise GridError(f"{where}: set widths (a width ladder) or depths (a depth ladder), not both")
    depths = [_positive_int(f"{where}.depths", v) for v in ladder.depths]
    widths = [_positive_int(f"{where}.widths", w) for w in ladder.widths]
    if depths:
        widths = [_positive_int("model.n_embd", ladder.width)] * len(depths)
    if not widths:
        raise GridError(f"{where}.widths is empty; list the model widths (n_embd) of the rungs")
    aspect = _positive_int(f"{where}.aspect", ladder.aspect)
    head_dim = _positive_int(f"{where}.head_dim", ladder.head_dim)
    ref = _positive_int(f"{where}.lr_ref_width", ladder.lr_ref_width)
    exponent = ladder.lr_width_exponent
    if isinstance(exponent, bool) or not isinstance(exponent, int | float) or not math.isfinite(exponent):
        raise GridError(f"{where}.lr_width_exponent={exponent!r} is not accepted; give a finite number")
    if budgets and (ladder.tokens is not None or ladder.tokens_per_param is not None):
        raise GridError(
            f"{where}: a ladder crossed with hydra.sweeper.budgets takes its tokens from the budgets; "
            f"set tokens and tokens_per_param to null (got tokens={ladder.tokens!r}, "
            f"tokens_per_param={ladder.tokens_per_param!r})"
        )
    if not budgets and (ladder.tokens is None) == (ladder.tokens_per_param is None):
        raise GridError(
            f"{where}: set exactly one of tokens (a fixed budget per rung) and tokens_per_param "
            f"(tokens = ratio × N); got tokens={ladder.tokens!r}, "
            f"tokens_per_param={ladder.tokens_per_param!r}"
        )
    if ladder.tokens is not None:
        _positive_int(f"{where}.tokens", ladder.tokens)
    elif not budgets:
        _positive_number(f"{where}.tokens_per_param", ladder.tokens_per_param)
    rungs: list[Rung] = []
    for i, d in enumerate(widths):
        units = (("head_dim", head_dim),) if depths else (("aspect", aspect), ("head_dim", head_dim))
        for name, unit in units:
            if d % unit:
                field_name = "model.n_embd" if depths else f"{where}.widths"
                raise GridError(f"{field_name}: {d} is not a multiple of {where}.{name}={unit}")
        depth, heads = (depths[i] if depths else d // aspect), d // head_dim
        size = 12 * depth * d * d
        if rungs and size <= rungs[-1].size:
            listed, now, before = (
                (f"depths={depths}", f"n_layer={depth}", f"n_layer={rungs[-1].depth}")
                if depths
                else (f"widths={widths}", f"n_embd={d}", f"n_embd={rungs[-1].width}")
            )
            raise GridError(
                f"{where}.{listed}: rung sizes must increase in N = 12·n_layer·n_embd², "
                f"but {now} gives N={size:,} after N={rungs[-1].size:,} ({before})"
            )
        steps = 0  # budgets: each job's steps are its budget's
        if not budgets:
            tokens = ladder.tokens if ladder.tokens is not None else ladder.tokens_per_param * size  # type: ignore[operator]
            steps = max(1, math.ceil(tokens / tokens_per_step))
        factor = (ref / d) ** float(exponent)
        lrs = [format_lr(v * factor) for v in base_lrs]
        if len(set(lrs)) != len(lrs):
            raise GridError(f"hydra.sweeper.lr: the grid at n_embd={d} has equal points at 3 digits ({lrs})")
        rungs.append(Rung(d, depth, heads, size, steps, lrs))
    return rungs


def build_grid(
    arm: str,
    arms: Sequence[str],
    baseline: str | None,
    lrs: Sequence[str],
    seeds: Sequence[str],
    params: dict[str, list[str]],
    cli: list[tuple[str, list[str], bool]],
    group_options: Callable[[str], list[str] | None] | None = None,
    ladder: Ladder | None = None,
    tokens_per_step: int = 1,
    budgets: bool = False,
) -> Grid:
    """The grid from the sweeper's config and the command line (key, values, is-a-sweep).

    A command-line value for the arm key, optim.lr, seed or a swept key replaces that dimension
    (`seed=1,2` runs two seeds); another swept key becomes one more dimension; everything else is
    passed to every job. `group_options(key)` lists a config group's options (None: not a group).
    With a `ladder`, its rungs are the first cell (`model.n_embd=24,48` on the command line replaces
    the widths); `lrs` are then the reference grid, each rung gets its own (`Ladder`). `budgets`: the
    grid will be expanded into trunks and branches (`with_budgets`), which set trainer.max_steps, so
    a rung does not.
    """
    if not arm:
        raise GridError("hydra.sweeper.arm is not set; name the override key the arms are (e.g. model/ffn)")
    where = {"arm": "hydra.sweeper.arms", "lr": "hydra.sweeper.lr", "seed": "hydra.sweeper.seeds"}
    arm_values, lr_list, seed_list = [str(a) for a in arms], list(lrs), list(seeds)
    cells = {k: list(v) for k, v in params.items()}
    fixed: list[str] = []
    for key, values, is_sweep in cli:
        if ladder is not None and (key == LR_KEY or key in ladder.derived):
            what = (
                "each rung has its own LR grid (hydra.sweeper.lr, ladder.lr_*)"
                if key == LR_KEY
                else ("the ladder's size rule sets it per rung (hydra.sweeper.ladder)")
            )
            raise GridError(f"{key} is not accepted on the command line of a ladder: {what}")
        if ladder is not None and key == ladder.key:
            try:
                ladder = replace(
                    ladder, **{"depths" if ladder.depths else "widths": [int(v) for v in values]}
                )
            except ValueError:
                raise GridError(f"{key}={','.join(values)}: a rung's value must be an integer") from None
            continue
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
    if ladder is None:
        return Grid(arm, arm_values, base, lr_list, seed_list, cells, fixed)
    key = ladder.key
    if key in cells:
        raise GridError(f"hydra.sweeper.params.{key} and a ladder both set it; use hydra.sweeper.ladder")
    rungs = ladder_rungs(ladder, [float(v) for v in lr_list], tokens_per_step, budgets)
    values = {str(r.depth if ladder.depths else r.width): r for r in rungs}

    def derived(r: Rung) -> list[str]:  # a depth ladder's rung is its n_layer already
        depth = [] if ladder.depths else [f"model.n_layer={r.depth}"]
        steps = [f"trainer.max_steps={r.steps}"] if r.steps else []  # budgets: each branch's own
        return [*depth, f"model.n_head={r.heads}", *steps]

    return Grid(
        arm, arm_values, base, lr_list, seed_list, {key: list(values), **cells}, fixed,
        ladder_key=key,
        rung_lrs={v: r.lrs for v, r in values.items()},
        rung_overrides={v: derived(r) for v, r in values.items()},
    )  # fmt: skip


def grid_identity(overrides: Sequence[str]) -> list[str]:
    """A job's overrides without the resume-only keys, sorted: what makes two jobs the same job. A
    budget branch's trunk is named by its job number (the sweep dir may have moved since)."""
    kept = [o for o in overrides if o.split("=", 1)[0].lstrip("+~") not in RESUME_KEYS]
    return sorted(
        f"branch_from=.../{o.rstrip('/').rsplit('/', 1)[-1]}" if o.startswith("branch_from=") else o
        for o in kept
    )
