"""An ablation sweep's jobs arranged as cell → arm → LR → seed, and what the report says of each arm.

Definitions (docs/ablations.md states them for readers):
- a job's *result* is its final validation loss (`final_val_loss`, taken at the last step); only
  a finished, non-diverged job has one. Diverged (metrics.json `diverged`, or stopped on a
  non-finite step) and missing (failed, killed, preempted, not started) jobs are counted and shown,
  never averaged in.
- an arm's *best LR* is the grid LR with the lowest mean result, among the LRs where every seed has
  a result; the loss there is the mean over seeds with a 95% t interval.
- *LR sensitivity* (Wortsman et al. 2023) is E over the LR grid of min(loss, loss at init) minus
  the minimum over the grid, with a diverged run counted at the loss at init. Computed per seed
  over that seed's LR curve and reported as the mean over seeds with a 95% t interval.
- the *loss at init* is ln(vocab size): the loss of the uniform prediction, which the small-σ
  init starts within ~0.01 of, the same for every arm (so no arm's divergences are cheaper).
- the comparison with the baseline arm is (arm − baseline) at each arm's own best LR: a paired t
  interval over the seeds when both have results for the same seeds, Welch's otherwise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import yaml

from gptlab.ablation.grid import LR_KEY, SEED_KEY
from gptlab.analysis.jobs import Job
from gptlab.analysis.stats import (
    Interval,
    lr_sensitivity,
    mean_interval,
    paired_difference,
    verdict,
    welch_difference,
)

RESULT, DIVERGED, MISSING = "result", "diverged", "missing"


def outcome(job: Job) -> str:
    if job.status == "diverged":
        return DIVERGED
    loss = job.metric("final_val_loss")
    if job.status == "finished" and loss is not None and math.isfinite(loss):
        return RESULT
    return MISSING


@dataclass
class LRPoint:
    """One (arm, LR) of a cell: its jobs by seed."""

    lr: float
    jobs: dict[str, Job] = field(default_factory=dict)

    def results(self) -> dict[str, float]:
        return {s: float(j.metric("final_val_loss")) for s, j in self.jobs.items() if outcome(j) == RESULT}  # type: ignore[arg-type]

    def count(self, kind: str) -> int:
        return sum(1 for j in self.jobs.values() if outcome(j) == kind)

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

    @property
    def best(self) -> LRPoint | None:
        eligible = [p for p in self.points if p.complete(self.seeds)]
        return min(eligible, key=lambda p: p.interval().mean) if eligible else None  # type: ignore[union-attr]

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
            losses = [j.metric("final_val_loss") if outcome(j) == RESULT else None for j in jobs]  # type: ignore[union-attr]
            out[s] = lr_sensitivity(losses, self.loss_at_init)
        return out

    def sensitivity(self) -> Interval | None:
        values = list(self.sensitivity_per_seed().values())
        return mean_interval(values) if values else None


@dataclass
class Comparison:
    arm: str
    baseline: str
    diff: Interval | None
    verdict: str


def compare(arm: ArmSummary, base: ArmSummary) -> Comparison:
    """(arm − baseline) at each one's best LR: paired by seed when the seeds match, Welch otherwise."""
    a, b = arm.best, base.best
    if a is None or b is None:
        return Comparison(arm.arm, base.arm, None, "no complete LR")
    ra, rb = a.results(), b.results()
    if set(ra) == set(rb) and len(ra) >= 2:
        seeds = sorted(ra)
        diff = paired_difference([ra[s] for s in seeds], [rb[s] for s in seeds])
    else:
        diff = welch_difference(list(ra.values()), list(rb.values()))
    return Comparison(arm.arm, base.arm, diff, verdict(diff))


@dataclass
class Cell:
    """One setting of the further swept keys (e.g. n_layer=12), with every arm in it."""

    values: dict[str, str]
    arms: list[ArmSummary]
    baseline: str

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


def arrange(jobs: list[Job], record: dict[str, Any]) -> list[Cell]:
    """Cells of the grid in `record` (ablation.json), each with its arms in grid order."""
    arm_key, arms, seeds = record["arm"], list(record["arms"]), list(record["seeds"])
    lrs, cell_keys = list(record["lrs"]), list(record.get("cells", {}))
    cell_values = [dict(zip(cell_keys, combo, strict=True)) for combo in _product(record.get("cells", {}))]
    init = loss_at_init(jobs)
    cells = []
    for values in cell_values:
        members = [j for j in jobs if all(j.values.get(k) == v for k, v in values.items())]
        summaries = []
        for arm in arms:
            points = [LRPoint(float(lr)) for lr in lrs]
            for j in members:
                if j.values.get(arm_key) != arm or j.values.get(LR_KEY) not in lrs:
                    continue
                points[lrs.index(j.values[LR_KEY])].jobs[j.values.get(SEED_KEY, "?")] = j
            summaries.append(ArmSummary(arm, points, seeds, init))
        cells.append(Cell(values, summaries, record["baseline"]))
    return cells


def _product(cells: dict[str, list[str]]) -> list[tuple[str, ...]]:
    import itertools

    return list(itertools.product(*cells.values())) if cells else [()]
