"""The attention sink and the gate by arm, read from the telemetry the jobs logged: Qiu et al. 2025's
question (does a gate on the attention output remove the sink on the first token?) asked of a sweep.

Per job: at its last step with `attn_sink/block_XX` logged for every block (the telemetry's attention
step; docs/telemetry.md: the mean over query rows t ≥ 1 of the softmax's probability on position 0),
each block's sink, their mean over blocks, and `attn_gate/block_XX`'s mean over blocks when logged.
Per arm, at its best LR: the per-block means over seeds, the block mean as the mean [95% t CI] over
seeds, and (arm − baseline) of the block mean, paired by seed when both arms have the same seeds,
Welch's otherwise (the same intervals as the loss comparison, `gptlab.analysis.stats`). A local
layer's rows beyond its window cannot see position 0 and count 0: the per-block columns say which.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass

from gptlab.analysis.stats import Interval, mean_interval, paired_difference, welch_difference
from gptlab.analysis.sweep.arms import ArmSummary, Cell
from gptlab.analysis.sweep.jobs import Job
from gptlab.analysis.sweep.tables import EMPTY, fmt_interval, table

SINK = re.compile(r"^attn_sink/block_(\d+)$")
GATE = re.compile(r"^attn_gate/block_(\d+)$")


@dataclass(frozen=True)
class JobSink:
    """One job's last attention step: its step, each block's sink, the gate's mean over blocks."""

    step: int
    blocks: list[float]
    gate: float | None

    @property
    def mean(self) -> float:
        return statistics.fmean(self.blocks)


def _series(job: Job, pattern: re.Pattern[str]) -> dict[int, dict[int, float]]:
    """Block → {step: value} for the keys `pattern` matches."""
    return {int(m.group(1)): dict(job.log[k]) for k in job.log if (m := pattern.match(k))}


def last_sink(job: Job) -> JobSink | None:
    """The job's last step at which every block logged its sink; None when none did."""
    sink = _series(job, SINK)
    if not sink:
        return None
    steps = set.intersection(*(set(s) for s in sink.values()))
    if not steps:
        return None
    step = max(steps)
    gate = _series(job, GATE)
    gates = [gate[b][step] for b in sorted(gate) if step in gate[b]]
    return JobSink(step, [sink[b][step] for b in sorted(sink)], statistics.fmean(gates) if gates else None)


def _best_sinks(arm: ArmSummary) -> dict[str, JobSink]:
    """Seed → the sink of that seed's job at the arm's best LR (seeds without telemetry left out)."""
    best = arm.best
    if best is None:
        return {}
    found = {s: last_sink(j) for s, j in best.jobs.items()}
    return {s: v for s, v in found.items() if v is not None}


def _difference(a: dict[str, JobSink], b: dict[str, JobSink]) -> Interval | None:
    """(a − b) of the block-mean sink: paired over the seeds both have, Welch's when they differ."""
    if not a or not b:
        return None
    if set(a) == set(b):
        seeds = sorted(a)
        return paired_difference([a[s].mean for s in seeds], [b[s].mean for s in seeds])
    return welch_difference([v.mean for v in a.values()], [v.mean for v in b.values()])


def sink_table(cell: Cell) -> str | None:
    """One row per arm at its best LR: per-block sink, block mean [CI], Δ vs baseline [CI], gate."""
    sinks = {a.arm: _best_sinks(a) for a in cell.arms}
    if not any(sinks.values()):
        return None
    base = sinks.get(cell.baseline, {})
    n_blocks = max(len(v.blocks) for found in sinks.values() for v in found.values())
    rows = []
    for arm in cell.arms:
        found = sinks[arm.arm]
        if not found:
            continue
        values = list(found.values())
        per_block = [statistics.fmean(col) for col in zip(*(v.blocks for v in values), strict=False)]
        gates = [v.gate for v in values if v.gate is not None]
        diff = None if arm.arm == cell.baseline else _difference(found, base)
        rows.append(
            [f"`{arm.arm}`", f"{arm.best.lr:.3g}", str(max(v.step for v in values)), str(len(values)),  # type: ignore[union-attr]
             *[f"{v:.3f}" for v in per_block], *[EMPTY] * (n_blocks - len(per_block)),
             fmt_interval(mean_interval([v.mean for v in values]), 3),
             fmt_interval(diff, 3) if diff is not None else EMPTY,
             f"{statistics.fmean(gates):.3f}" if gates else EMPTY]
        )  # fmt: skip
    head = ["arm", "LR", "step", "seeds", *[f"block {b}" for b in range(n_blocks)], "mean over blocks",
            "Δ vs baseline", "gate mean"]  # fmt: skip
    return table(head, rows)
