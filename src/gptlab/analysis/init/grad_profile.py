"""The gradient norm per block early in training, by arm: Xiong et al. 2020's Fig. 3 question (does
the gradient grow toward the output under post-LN and stay level under pre-LN?) read from the
telemetry the jobs logged (`grad_norm/block_XX/ffn`, every `callbacks.telemetry.every_n_steps`).

Per arm, at its best LR: each seed's FFN gradient norm per block at the first step the telemetry
logged, then the mean over seeds; last/first is the ratio of the last block's to the first's.
"""

from __future__ import annotations

import re
import statistics

from gptlab.analysis.sweep.arms import Cell, LRPoint
from gptlab.analysis.sweep.jobs import Job
from gptlab.analysis.sweep.tables import EMPTY, table

BLOCK_FFN = re.compile(r"^grad_norm/block_(\d+)/ffn$")


def first_profile(job: Job) -> tuple[int, list[float]] | None:
    """(step, FFN gradient norm of block 0..L-1) at the job's first telemetry step, or None."""
    series = {int(m.group(1)): job.log[k] for k in job.log if (m := BLOCK_FFN.match(k))}
    if not series or any(not series[b] for b in series):
        return None
    step = min(s for s, _ in series[0])
    try:
        values = [dict(series[b])[step] for b in sorted(series)]
    except KeyError:
        return None
    return step, values


def point_profile(point: LRPoint) -> tuple[int, list[float], int] | None:
    """(step, per-block mean over the seeds, number of seeds) for one (arm, LR); None without data."""
    found = [p for p in (first_profile(j) for j in point.jobs.values()) if p is not None]
    if not found:
        return None
    step = min(s for s, _ in found)
    rows = [v for s, v in found if s == step and len(v) == len(found[0][1])]
    return step, [statistics.fmean(col) for col in zip(*rows, strict=True)], len(rows)


def profile_table(cell: Cell) -> str | None:
    """One row per arm (at its best LR): the block profile and last/first; None when not logged."""
    rows = []
    n_blocks = 0
    for arm in cell.arms:
        best = arm.best
        found = point_profile(best) if best is not None else None
        if found is None:
            continue
        step, means, n = found
        n_blocks = max(n_blocks, len(means))
        ratio = means[-1] / means[0] if means[0] > 0 else float("nan")
        rows.append((arm.arm, best.lr, step, n, means, ratio))  # type: ignore[union-attr]
    if not rows:
        return None
    head = ["arm", "LR", "step", "seeds", *[f"block {b}" for b in range(n_blocks)], "last / first"]
    body = [  # arms of different depth (arm = n_layer) leave their missing blocks empty
        [f"`{arm}`", f"{lr:.3g}", str(step), str(n), *[f"{v:.3g}" for v in means],
         *[EMPTY] * (n_blocks - len(means)), f"{ratio:.3g}"]
        for arm, lr, step, n, means, ratio in rows
    ]  # fmt: skip
    return table(head, body)
