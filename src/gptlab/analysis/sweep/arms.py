"""An ablation sweep's jobs arranged as cell → arm → LR → seed, and what the report says of each arm.

Definitions (docs/ablations.md states them for readers):
- a job's *result* is its final validation loss (`final_val_loss`, taken at the last step); only
  a finished, non-diverged job has one. Diverged (metrics.json `diverged`, or stopped on a
  non-finite step) and missing (failed, killed, preempted, not started) jobs are counted and shown,
  never averaged in.
- an arm's *best LR* is the grid LR with the lowest mean result, among the LRs where every seed has
  a result; the loss there is the mean over seeds with a 95% t interval.
- *LR sensitivity* (Wortsman et al. 2023) is E over the LR grid of min(loss, loss at init) minus
  the minimum over the grid. What a diverged run counts as is a setting (`SENSITIVITY_MODES`):
  "init" (the default) counts every run flagged diverged at the loss at init, even when its final
  loss is finite (a train loss above 3× its first is a failed run that clipping kept finite);
  "wortsman" is the paper's min(final loss, loss at init): only a non-finite final loss counts at
  the loss at init (and a run stopped on a non-finite step, in both modes: its last validation was
  before the stop, so it is no final loss). Computed per seed over that seed's LR curve (a seed
  with a missing job is left out) and reported as the mean over seeds with a 95% t interval
  clipped to [0, loss at init], the range the quantity cannot leave (each seed's value is a mean
  minus a minimum, so >= 0).
- the *loss at init* is ln(vocab size): the loss of the uniform prediction, which the small-σ
  init starts within ~0.01 of, the same for every arm (so no arm's divergences are cheaper).
- the comparison with the baseline arm is (arm − baseline) at each arm's own best LR: a paired t
  interval over the seeds when both have results for the same seeds, Welch's otherwise, no
  interval at all with one seed ("1 seed: no interval").
- a comparison is *complete* when every planned (LR, seed) job of both arms (ablation.json's grid)
  has a result. Otherwise a best LR may have been picked from a partial curve, so the verdict is
  never better/worse: "incomplete: <which arm, LR, seeds> missing" when a job has no result at all
  (its point could have been anywhere), "inconclusive (partial curve): <...> diverged" when every
  gap is a diverged or non-finite run. The difference is still shown. An LR where *every* seed
  diverged is no gap: that point of the curve is known (bad, as a too-high LR is), the best LR
  cannot be there, and the grid's top diverging is the normal shape of an LR sweep.
- the same rules hold for a downstream task's metric (issue 38) in place of the val loss (a
  `Measure`): a job's result is then that number from metrics.json `tasks`, read only from a job
  that has a val-loss result (a diverged job's task numbers are not averaged either); a finished
  job without the task's number is a gap ("no <task> <metric>": incomplete, never better/worse);
  the best LR is the highest mean for acc and acc_norm, the lowest for bpb, and "better" is the
  interval of (arm − baseline) wholly above 0 for acc, below 0 for bpb.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import yaml

from gptlab.ablation.grid import LR_KEY, SEED_KEY
from gptlab.analysis.stats import (
    Interval,
    clip_interval,
    lr_sensitivity,
    mean_interval,
    paired_difference,
    verdict,
    welch_difference,
)
from gptlab.analysis.sweep.jobs import Job

RESULT, DIVERGED, MISSING = "result", "diverged", "missing"
SENSITIVITY_MODES = ("init", "wortsman")  # what a diverged run counts as in LR sensitivity
DIVERGED_KINDS = ("diverged", "non-finite loss")  # gaps that are results of a kind, not absences
MAX_GAP_GROUPS = 4  # a verdict names this many (arm, LR, kind) groups, then "and k more"


@dataclass(frozen=True)
class Measure:
    """What a job's result is: its final val loss (the default), or one metric of one downstream
    task from metrics.json `tasks` (issue 38), with the direction that is better."""

    name: str = "final val loss"
    task: str | None = None
    metric: str = "final_val_loss"
    higher_is_better: bool = False

    def value(self, job: Job) -> float | None:
        return job.metric(self.metric) if self.task is None else job.task_metric(self.task, self.metric)


VAL_LOSS = Measure()


def outcome(job: Job, measure: Measure = VAL_LOSS) -> str:
    """RESULT, DIVERGED or MISSING. A task's number counts only where the val loss does: a job
    without a val-loss result has none of its task numbers either."""
    if job.status == "diverged":
        return DIVERGED
    loss = job.metric("final_val_loss")
    if job.status == "finished" and loss is not None and math.isfinite(loss):
        value = measure.value(job)
        return RESULT if value is not None and math.isfinite(value) else MISSING
    return MISSING


def gap_kind(job: Job | None, measure: Measure = VAL_LOSS) -> str | None:
    """Why a planned job gives no result (None: it has one): "missing" (no job dir or no
    metrics.json), its status ("failed", "not started", ...), "diverged", "non-finite loss", or for
    a task "no <task> <metric>" (a finished job without that number, e.g. an older run)."""
    if job is None:
        return "missing"
    kind = outcome(job, measure)
    if kind == RESULT:
        return None
    if kind == DIVERGED:
        loss = job.metric("final_val_loss")
        return "non-finite loss" if loss is not None and not math.isfinite(loss) else "diverged"
    if measure.task is not None and outcome(job) == RESULT:
        return f"no {measure.name}"
    return "no final val loss" if job.status == "finished" else job.status


@dataclass(frozen=True)
class Gap:
    """A planned (LR, seed) job of one arm without a result."""

    lr: float
    seed: str
    kind: str


@dataclass
class LRPoint:
    """One (arm, LR) of a cell: its jobs by seed."""

    lr: float
    jobs: dict[str, Job] = field(default_factory=dict)
    measure: Measure = VAL_LOSS

    def results(self) -> dict[str, float]:
        m = self.measure
        return {s: float(m.value(j)) for s, j in self.jobs.items() if outcome(j, m) == RESULT}  # type: ignore[arg-type]

    def count(self, kind: str) -> int:
        return sum(1 for j in self.jobs.values() if outcome(j, self.measure) == kind)

    def complete(self, seeds: list[str]) -> bool:
        """Every seed of the grid has a result here (no divergence, nothing missing)."""
        return set(self.results()) == set(seeds)

    def interval(self) -> Interval | None:
        values = list(self.results().values())
        return mean_interval(values) if values else None


@dataclass
class ArmSummary:
    arm: str
    points: list[LRPoint]  # in grid order
    seeds: list[str]
    loss_at_init: float | None
    sensitivity_mode: str = "init"  # one of SENSITIVITY_MODES
    where: str = ""  # the cell's title, to name this arm in an across-cells comparison
    measure: Measure = VAL_LOSS  # what a result is (LR sensitivity is the val loss's, whatever it is)

    def gaps(self) -> list[Gap]:
        """Every planned (LR, seed) of this arm without a result, in grid order."""
        out = []
        for p in self.points:
            kinds = [gap_kind(p.jobs.get(s), self.measure) for s in self.seeds]
            if kinds and all(k in DIVERGED_KINDS for k in kinds):
                continue  # every seed diverged here: a whole point of the curve, known bad (a result)
            for s, kind in zip(self.seeds, kinds, strict=True):
                if kind is not None:
                    out.append(Gap(p.lr, s, kind))
        return out

    @property
    def best(self) -> LRPoint | None:
        eligible = [p for p in self.points if p.complete(self.seeds)]
        pick = max if self.measure.higher_is_better else min
        return pick(eligible, key=lambda p: p.interval().mean) if eligible else None  # type: ignore[union-attr]

    @property
    def best_at_edge(self) -> bool:
        """The best LR is the grid's smallest or largest: the optimum may lie outside the grid."""
        best = self.best
        return best is not None and len(self.points) > 1 and best in (self.points[0], self.points[-1])

    def sensitivity_per_seed(self) -> dict[str, float]:
        """Seed → Wortsman LR sensitivity of that seed's LR curve (seeds with a missing job left out)."""
        if self.loss_at_init is None:
            return {}
        out = {}
        for s in self.seeds:
            jobs = [p.jobs.get(s) for p in self.points]
            if any(j is None or outcome(j) == MISSING for j in jobs):
                continue
            out[s] = lr_sensitivity([self._sensitivity_loss(j) for j in jobs], self.loss_at_init)  # type: ignore[arg-type]
        return out

    def _sensitivity_loss(self, job: Job) -> float | None:
        """The loss a job adds to its seed's LR curve; None counts at the loss at init."""
        if outcome(job) == RESULT:
            return job.metric("final_val_loss")
        trained_to_the_end = (job.metrics or {}).get("status", "finished") == "finished"
        if self.sensitivity_mode == "wortsman" and trained_to_the_end:  # min(final loss, loss at init)
            return job.metric("final_val_loss")
        # "init": a diverged run counts at the loss at init, whatever its final loss; in either mode
        # so does a run stopped on a non-finite step (its "final" loss is an earlier validation's)
        return None

    def sensitivity(self) -> Interval | None:
        """Mean over seeds, t interval clipped to [0, loss at init] (the quantity's range)."""
        values = list(self.sensitivity_per_seed().values())
        if not values or self.loss_at_init is None:
            return None
        return clip_interval(mean_interval(values), 0.0, self.loss_at_init)


@dataclass
class Comparison:
    arm: str
    baseline: str
    diff: Interval | None
    verdict: str
    planned: int = 0  # planned (LR, seed) jobs of the two arms together
    gaps: list[str] = field(default_factory=list)  # those without a result, grouped by arm, LR, kind
    planned_seeds: int = 0
    n_gaps: int = 0  # planned jobs without a result

    @property
    def complete(self) -> bool:
        return not self.gaps


def describe_gaps(name: str, gaps: list[Gap]) -> list[str]:
    """ "untied lr 0.01 seeds 1, 2 missing": one phrase per (LR, kind), in grid order."""
    groups: dict[tuple[float, str], list[str]] = {}
    for g in gaps:
        groups.setdefault((g.lr, g.kind), []).append(g.seed)
    return [
        f"{name} lr {lr:.3g} seed{'s' if len(seeds) > 1 else ''} {', '.join(seeds)} {kind}"
        for (lr, kind), seeds in groups.items()
    ]


def _gap_verdict(phrases: list[str], any_absent: bool, head: str | None = None) -> str:
    shown = phrases[:MAX_GAP_GROUPS]
    more = len(phrases) - len(shown)
    text = "; ".join(shown) + (f"; and {more} more" if more else "")
    head = head or ("incomplete" if any_absent else "inconclusive (partial curve)")
    return f"{head}: {text}"


def compare(arm: ArmSummary, base: ArmSummary) -> Comparison:
    """(arm − baseline) at each one's best LR: paired by seed when the seeds match, Welch otherwise;
    better/worse only when the comparison is complete (every planned job of both arms has a result)."""
    if arm.arm == base.arm:  # the same arm in two cells (across cells): name the cells
        names = (f"{arm.arm} at {arm.where}", f"{base.arm} at {base.where}")
    else:
        names = (arm.arm, base.arm)
    gaps_a, gaps_b = arm.gaps(), base.gaps()
    phrases = describe_gaps(names[0], gaps_a) + describe_gaps(names[1], gaps_b)
    absent = any(g.kind not in DIVERGED_KINDS for g in gaps_a + gaps_b)
    planned = len(arm.points) * len(arm.seeds) + len(base.points) * len(base.seeds)
    n_gaps = len(gaps_a) + len(gaps_b)
    info = {"planned": planned, "gaps": phrases, "planned_seeds": len(arm.seeds), "n_gaps": n_gaps}
    a, b = arm.best, base.best
    if a is None or b is None:
        text = _gap_verdict(phrases, absent, "no complete LR") if phrases else "no complete LR"
        return Comparison(arm.arm, base.arm, None, text, **info)  # type: ignore[arg-type]
    ra, rb = a.results(), b.results()
    if set(ra) == set(rb):
        seeds = sorted(ra)
        diff = paired_difference([ra[s] for s in seeds], [rb[s] for s in seeds])
    else:
        diff = welch_difference(list(ra.values()), list(rb.values()))
    text = _gap_verdict(phrases, absent) if phrases else verdict(diff, arm.measure.higher_is_better)
    return Comparison(arm.arm, base.arm, diff, text, **info)  # type: ignore[arg-type]


@dataclass
class Cell:
    """One setting of the further swept keys (e.g. n_layer=12), with every arm in it."""

    values: dict[str, str]
    arms: list[ArmSummary]
    baseline: str

    def __post_init__(self) -> None:
        for a in self.arms:  # an across-cells comparison names each side by its cell
            a.where = a.where or self.title

    @property
    def title(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.values.items()) or "all jobs"

    def comparisons(self) -> list[Comparison]:
        base = next(a for a in self.arms if a.arm == self.baseline)
        return [compare(a, base) for a in self.arms if a.arm != self.baseline]


@dataclass
class CellComparison:
    """One arm in two cells that differ in one key: (arm at key=value) − (arm at key=reference)."""

    key: str
    value: str
    reference: str
    comparison: Comparison
    fixed: dict[str, str]  # the other cell keys, the same in both cells


def across_cells(cells: list[Cell], order: dict[str, list[str]]) -> list[CellComparison]:
    """Each arm against itself in the cell whose value of one key is that key's first (e.g. the depth
    check: global at n_layer=8 against global at n_layer=2), each cell at its own best LR."""
    out = []
    for key, values in order.items():
        for cell in cells:
            value = cell.values[key]
            if value == values[0]:
                continue
            ref_values = {**cell.values, key: values[0]}
            ref = next(c for c in cells if c.values == ref_values)
            fixed = {k: v for k, v in cell.values.items() if k != key}
            for arm, base in zip(cell.arms, ref.arms, strict=True):
                out.append(CellComparison(key, value, values[0], compare(arm, base), fixed))
    return out


def vocab_size(job: Job) -> int | None:
    """The model's vocabulary from metrics.json, else from the job's .hydra/config.yaml."""
    v = job.metric("vocab_size")
    if v is not None:
        return int(v)
    if job.path is None:
        return None
    try:
        cfg = yaml.safe_load((job.path / ".hydra" / "config.yaml").read_text())
        return int(cfg["model"]["vocab_size"])
    except (OSError, KeyError, TypeError, ValueError, yaml.YAMLError):
        return None


def loss_at_init(jobs: list[Job]) -> float | None:
    sizes = {v for v in (vocab_size(j) for j in jobs) if v is not None}
    return math.log(max(sizes)) if sizes else None


def arrange(
    jobs: list[Job], record: dict[str, Any], sensitivity: str = "init", measure: Measure = VAL_LOSS
) -> list[Cell]:
    """Cells of the grid in `record` (ablation.json), each with its arms in grid order; `sensitivity`
    is what a diverged run counts as in LR sensitivity (one of SENSITIVITY_MODES); `measure` what a
    job's result is (the final val loss, or a task's metric)."""
    check_sensitivity_mode(sensitivity)
    arm_key, arms, seeds = record["arm"], list(record["arms"]), list(record["seeds"])
    lrs, cell_keys = list(record["lrs"]), list(record.get("cells", {}))
    cell_values = [dict(zip(cell_keys, combo, strict=True)) for combo in _product(record.get("cells", {}))]
    init = loss_at_init(jobs)
    cells = []
    for values in cell_values:
        members = [j for j in jobs if all(j.values.get(k) == v for k, v in values.items())]
        if record.get("ladder_key"):  # a ladder: each rung (cell) has its own LR grid
            lrs = list(record["rung_lrs"][values[record["ladder_key"]]])
        summaries = []
        for arm in arms:
            points = [LRPoint(float(lr), measure=measure) for lr in lrs]
            for j in members:
                if j.values.get(arm_key) != arm or j.values.get(LR_KEY) not in lrs:
                    continue
                points[lrs.index(j.values[LR_KEY])].jobs[j.values.get(SEED_KEY, "?")] = j
            summaries.append(ArmSummary(arm, points, seeds, init, sensitivity, measure=measure))
        cells.append(Cell(values, summaries, record["baseline"]))
    return cells


def check_sensitivity_mode(mode: str) -> None:
    if mode not in SENSITIVITY_MODES:
        raise ValueError(f"lr_sensitivity={mode!r} is not accepted; choose {' or '.join(SENSITIVITY_MODES)}")


def _product(cells: dict[str, list[str]]) -> list[tuple[str, ...]]:
    import itertools

    return list(itertools.product(*cells.values())) if cells else [()]
