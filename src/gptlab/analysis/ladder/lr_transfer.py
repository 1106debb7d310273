"""Does one LR grid hold across a ladder's rungs? μP's promise (Yang et al. 2022) is that the best LR
found at one width is the best at every width; under SP it drifts. Per arm: the best LR at each rung
(its grid point and value), the drift between rungs in grid steps, and the slope of log best LR on
log N. "Holds" is the test the issue states: the same grid point or its neighbour at every rung.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from gptlab.analysis.ladder.records import LadderResult


@dataclass(frozen=True)
class RungBest:
    rung: str
    n: float | None
    lr: float | None  # None: no LR of the rung has every seed's result
    index: int | None  # its point on the rung's grid, 0 = the smallest LR
    points: int  # the rung's grid size
    at_edge: bool


@dataclass(frozen=True)
class ArmTransfer:
    arm: str
    parametrization: str
    rungs: list[RungBest]
    step: float  # the grid's ratio between neighbouring LRs
    drift_steps: float | None  # log(largest / smallest best LR) / log(step)
    slope: float | None  # least-squares d log(best LR) / d log N
    verdict: str


def parametrization(record: dict[str, Any]) -> str:
    """The sweep's model.parametrization (sp when the composed configs do not say)."""
    configs = record.get("configs") or {}
    found = {str((c.get("model") or {}).get("parametrization", "sp")) for c in configs.values()}
    return "/".join(sorted(found)) or "sp"


def transfer(res: LadderResult, record: dict[str, Any]) -> list[ArmTransfer]:
    """Each arm's best LR against the rungs of `res` (ladder.analyse's result for the same record)."""
    rung_lrs = {r: [float(x) for x in lrs] for r, lrs in (record.get("rung_lrs") or {}).items()}
    label = parametrization(record)
    out = []
    for arm in res.arms:
        rows = []
        for rung in res.rungs:
            cell = res.table.get((rung, arm))
            grid = rung_lrs.get(rung) or [float(x) for x in record.get("lrs", [])]
            lr = cell.best_lr if cell is not None else None
            index = _index(grid, lr)
            at_edge = index is not None and index in (0, len(grid) - 1)
            rows.append(RungBest(rung, cell.n if cell else None, lr, index, len(grid), at_edge))
        out.append(_arm(arm, label, rows, _step(rung_lrs, record)))
    return out


def _arm(arm: str, label: str, rows: list[RungBest], step: float) -> ArmTransfer:
    found = [r for r in rows if r.lr is not None]
    if len(found) < 2 or len(found) < len(rows):
        return ArmTransfer(arm, label, rows, step, None, None, "no verdict: a rung has no best LR")
    lrs = np.array([r.lr for r in found], dtype=float)
    drift = math.log(lrs.max() / lrs.min()) / math.log(step) if step > 1 else None
    slope = None
    if all(r.n for r in found):
        slope = float(np.polyfit(np.log([r.n for r in found]), np.log(lrs), 1)[0])
    if drift is None:
        verdict = "no verdict: a grid of one LR"
    elif drift <= 1 + 1e-6:
        edges = [r.rung for r in found if r.at_edge]
        verdict = "holds" + (
            f" (on the grid's edge at {', '.join(edges)}: the optimum may lie beyond)" if edges else ""
        )
    else:
        verdict = (
            f"drifts ({drift:.1f} grid steps, best LR ∝ N^{slope:.2f})" if slope is not None else "drifts"
        )
    return ArmTransfer(arm, label, rows, step, drift, slope, verdict)


def _index(grid: list[float], lr: float | None) -> int | None:
    if lr is None or not grid:
        return None
    return int(np.argmin([abs(math.log(g / lr)) for g in grid]))


def _step(rung_lrs: dict[str, list[float]], record: dict[str, Any]) -> float:
    """The log grid's ratio (the ladder scales a whole rung's grid, so every rung has the same)."""
    grid = next(iter(rung_lrs.values()), None) or [float(x) for x in record.get("lrs", [])]
    if len(grid) < 2:
        return 1.0
    return (grid[-1] / grid[0]) ** (1 / (len(grid) - 1))
