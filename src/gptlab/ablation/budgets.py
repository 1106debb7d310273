"""A sweep over token budgets (`hydra.sweeper.budgets`): each arm × LR × seed as one WSD trunk and one
decay branch per budget, instead of one whole run per budget (docs/sweeps.md, "Budgets").

A budget of B steps is a branch from the trunk's step B − d that decays over d = round(decay_fraction
× B) steps (at least 1): its run is the single WSD run of B steps that decays over its last d
(docs/optim.md). The trunk (`optim.decay_steps=0`) runs to the largest branch point and saves a
checkpoint at each. Pure: no Hydra runtime, so the report rebuilds the same jobs from ablation.json.

Job order: every trunk first, in the plain grid's order (seed, cells, arm, LR), then every branch,
trunk by trunk, budgets in the order given. Job k's number never depends on which jobs ran.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from gptlab.wsd import branch_point_value

SCHEDULE = "optim.schedule=wsd"
BRANCH_FROM, BRANCH_AT, DECAY_KEY = "branch_from", "branch.at", "optim.decay_steps"
POINTS_KEY, STEPS_KEY = "optim.branch_points", "trainer.max_steps"
# what the budgets set per job: given on the command line too, they would fight it
BUDGET_DERIVED = (
    "optim.schedule",
    DECAY_KEY,
    "optim.decay_fraction",
    POINTS_KEY,
    STEPS_KEY,
    BRANCH_FROM,
    BRANCH_AT,
)


class BudgetError(ValueError):
    """A bad budget list: one line naming the field."""


def budget_steps(budgets: Sequence[object], tokens_per_step: int) -> list[int]:
    """Each budget in optimizer steps: an integer is steps, a string with a K, M, G or T suffix is
    tokens, rounded up to whole steps (tokens per step per device, as the ladder's budget)."""
    where = "hydra.sweeper.budgets"
    out = []
    for b in budgets:
        try:
            kind, n = branch_point_value(b)
        except ValueError:
            raise BudgetError(
                f"{where} has {b!r}, which is not accepted; give steps (integers >= 1) or token "
                "counts with a K, M, G or T suffix (e.g. '2M')"
            ) from None
        out.append(n if kind == "step" else math.ceil(n / tokens_per_step))
    if len(set(out)) != len(out):
        raise BudgetError(f"{where}={list(budgets)} names a budget twice (in steps: {out})")
    if out != sorted(out):
        raise BudgetError(f"{where}={list(budgets)} must increase (in steps: {out})")
    return out


def decay_of(budget: int, fraction: float) -> int:
    """The decay of a budget of `budget` steps: round(fraction × budget), at least one step."""
    return max(1, round(fraction * budget))


def budget_plan(budgets: list[int], fraction: object, warmup: int) -> list[tuple[int, int, int]]:
    """(budget, branch point, decay) per budget, checked: each branch point after the warmup."""
    ok = isinstance(fraction, int | float) and not isinstance(fraction, bool) and 0 < fraction < 1
    if not ok:
        raise BudgetError(
            f"hydra.sweeper.decay_fraction={fraction!r} is not accepted; give a number in (0, 1)"
        )
    plan = []
    for b in budgets:
        d = decay_of(b, float(fraction))  # type: ignore[arg-type]
        at = b - d
        if at < max(1, warmup):
            raise BudgetError(
                f"hydra.sweeper.budgets: a budget of {b} steps decays over {d} from step {at}, "
                f"inside the warmup (optim.warmup_steps={warmup}); give budgets >= "
                f"{math.ceil(max(1, warmup) / (1 - float(fraction)))} steps"  # type: ignore[arg-type]
            )
        plan.append((b, at, d))
    return plan


def trunk_overrides(plan: list[tuple[int, int, int]]) -> list[str]:
    """The trunk's own overrides: no decay, a checkpoint at each branch point, run to the last."""
    points = ",".join(str(at) for _, at, _ in plan)
    last = max(at for _, at, _ in plan)
    return [SCHEDULE, f"{DECAY_KEY}=0", f"{POINTS_KEY}=[{points}]", f"{STEPS_KEY}={last}"]


def branch_overrides(trunk_dir: str, budget: int, at: int, decay: int) -> list[str]:
    """A branch's own overrides (its other ones repeat the trunk's: model, data, optim, seed)."""
    return [
        SCHEDULE,
        f"{DECAY_KEY}={decay}",
        f"{BRANCH_FROM}={trunk_dir}",
        f"{BRANCH_AT}={at}",
        f"{STEPS_KEY}={budget}",
    ]


def expand(
    plain: list[list[str]], sweep_dir: str, plan: list[tuple[int, int, int]], n_fixed: int
) -> list[list[str]]:
    """Trunks then branches from the plain grid's jobs (`plain`, whose last `n_fixed` overrides are
    the command line's fixed ones): trunk k is job k, its branches follow all trunks."""
    trunks, branches = [], []
    for k, job in enumerate(plain):
        own, fixed = job[: len(job) - n_fixed], job[len(job) - n_fixed :]
        trunks.append([*own, *trunk_overrides(plan), *fixed])
        for budget, at, d in plan:
            branches.append([*own, *branch_overrides(f"{sweep_dir}/{k}", budget, at, d), *fixed])
    return trunks + branches


def is_branch(values: dict[str, str]) -> bool:
    return BRANCH_FROM in values


def compute_saved(jobs: list[list[str]]) -> tuple[int, int]:
    """(steps the branches trained through, steps run): the branches' Σ(at + d) is what separate
    runs of each budget would cost; the trunks and the decays are what was run. Their difference is
    the saving, in optimizer steps."""
    separate = run = 0
    for job in jobs:
        values = dict(o.split("=", 1) for o in job)
        if BRANCH_FROM in values:
            at, d = int(values[BRANCH_AT]), int(values[DECAY_KEY])
            separate += at + d
            run += d
        else:
            run += int(values[STEPS_KEY])
    return separate, run
