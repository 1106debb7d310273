"""A ladder sweep's answer: does an arm's difference from the baseline widen, narrow, hold or flip
with model size?

Per rung (a width of `hydra.sweeper.ladder`) each arm's best LR is picked as in the plain report
(lowest mean over the LRs where every seed has a result); the per-seed final val losses there are
the points. Per arm, L(N) = E + A·N^(−α) is fitted to those points against the non-embedding
parameters N of each job's model (`GPT.num_params(exclude_embedding=True)`), and again against the
training FLOPs C = (6·N + 12·L·T·d)·tokens (`GPT.flops_per_token`, PaLM's count). Intervals come
from the bootstrap over seeds of `gptlab.analysis.ladder.powerlaw` (one draw of seeds for every rung and
arm; estimate ± t(n−1)·SE). In every resample the best LR of each (rung, arm) is *picked again*
from the resampled means: the point estimate picks it from the data, so its sampling variation
includes that choice, and an interval that held the LR fixed would leave it out.

This module gathers the points and runs the steps; the curves and the verdict rule are in
`gptlab.analysis.ladder.fit`, the forecasts of held-out rungs in `gptlab.analysis.ladder.held_out`,
the result types in `gptlab.analysis.ladder.records`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import yaml

from gptlab.ablation.grid import DEPTH_KEY
from gptlab.analysis.ladder import powerlaw
from gptlab.analysis.ladder.fit import MIN_RUNGS, arm_fit, best_points, extrapolate, fit_curves, trend
from gptlab.analysis.ladder.held_out import held_out
from gptlab.analysis.ladder.records import ArmFit, LadderError, LadderResult, RungArm
from gptlab.analysis.sweep.arms import RESULT, Cell, outcome
from gptlab.analysis.sweep.jobs import Job


def model_size(job: Job) -> tuple[int, int] | None:
    """(N, training FLOPs per token) of a job's model, from metrics.json (num_params, vocab_size)
    and the shape in its .hydra/config.yaml; None when either is missing.

    N is Kaplan et al.'s non-embedding count: every vocabulary matrix and the position table are
    out of it, *also a head tied to the embedding*. FLOPs per token are `GPT.flops_per_token`'s
    6·N' + 12·L·T·d (PaLM), N' = `GPT.num_params(exclude_embedding=True)`, which keeps the head
    (its matmul is paid per token, tied or not). Counted from the totals rather than by building
    the model: a meta-device GPT costs ~1 s a config here, a report has one per (rung, arm)."""
    total, vocab = job.metric("num_params"), job.metric("vocab_size")
    if job.path is None or total is None or vocab is None:
        return None
    try:
        model = yaml.safe_load((job.path / ".hydra" / "config.yaml").read_text())["model"]
        d, layers, block = int(model["n_embd"]), int(model["n_layer"]), int(model["block_size"])
        tied, learned_pos = bool(model.get("tie_embeddings", True)), model.get("pos_emb", "rope") == "learned"
    except (OSError, KeyError, TypeError, ValueError, yaml.YAMLError):
        return None
    table = int(vocab) * d
    pos = block * d if learned_pos else 0
    with_head = int(total) - pos - (0 if tied else table)  # GPT.num_params(exclude_embedding=True)
    n = with_head - table  # the head (tied or not) out as well
    return n, 6 * with_head + 12 * layers * block * d


def _tokens(job: Job) -> float | None:
    return job.metric("tokens_seen")


def check_sizes(rungs: list[str], sizes: dict[str, float], arm: str) -> None:
    """LadderError unless the arm's N rises strictly with the rung order."""
    known = [(r, sizes[r]) for r in rungs if r in sizes]
    for (r0, n0), (r1, n1) in zip(known, known[1:], strict=False):
        if not n1 > n0:
            raise LadderError(
                f"ladder sizes must increase in N: {arm} has N={n1:,.0f} at rung {r1} after N={n0:,.0f} "
                f"at rung {r0}; order the rungs by size"
            )


def cell_values(cells: list[Cell], seeds: list[str]) -> np.ndarray:
    """(R, K, LR, S) results of the cells (in the order given: rungs, or budgets), arms in grid
    order; NaN where a planned job has none."""
    n_lr = len(cells[0].arms[0].points) if cells else 0
    vals = np.full((len(cells), len(cells[0].arms) if cells else 0, n_lr, len(seeds)), np.nan)
    for i, cell in enumerate(cells):
        for k, a in enumerate(cell.arms):
            for li, p in enumerate(a.points):
                res = p.results()
                for si, s in enumerate(seeds):
                    if s in res:
                        vals[i, k, li, si] = res[s]
    return vals


def _gap_estimate(diff: np.ndarray, reps: np.ndarray, n: int) -> powerlaw.Estimate:
    return powerlaw.estimate(float(diff), reps, n)


def analyse(cells: list[Cell], record: dict[str, Any]) -> LadderResult:
    """The ladder's tables, fits and verdicts from the report's cells (one cell per rung; a ladder
    crossed with further cell keys raises LadderError). A ladder the fit refuses (fewer than
    MIN_RUNGS sizes planned, N not increasing) comes back with `refused` set and no fit, its
    per-rung table still filled; a fit impossible for want of results has `note` set instead."""
    key = str(record["ladder_key"])
    rungs = [str(v) for v in record["cells"][key]]
    if len(record.get("cells", {})) > 1:
        raise LadderError(f"a ladder crossed with further cells ({', '.join(record['cells'])}) is not fitted")
    arms, baseline, seeds = list(record["arms"]), str(record["baseline"]), list(record["seeds"])
    by_rung = {c.values[key]: c for c in cells}
    table: dict[tuple[str, str], RungArm] = {}
    incomplete = []
    for r in rungs:
        cell = by_rung[r]
        if any(a.gaps() for a in cell.arms):
            incomplete.append(r)
        for a in cell.arms:
            jobs = [j for p in a.points for j in p.jobs.values()]
            size = next((s for s in (model_size(j) for j in jobs if j.path is not None) if s), None)
            tokens = next((t for t in (_tokens(j) for j in jobs if outcome(j) == RESULT) if t), None)
            entry = RungArm(
                n=float(size[0]) if size else None,
                flops_per_token=float(size[1]) if size else None,
                tokens=tokens,
            )
            best = a.best
            if best is not None:
                entry.best_lr, entry.best_at_edge = best.lr, a.best_at_edge
                entry.points = best.results()
            table[(r, a.arm)] = entry
    # values (R, K, LR, S) for the bootstrap; complete (R, K, LR): every seed has a result there
    vals = cell_values([by_rung[r] for r in rungs], seeds)
    complete = np.isfinite(vals).all(-1)
    used = [r for i, r in enumerate(rungs) if complete[i].any(-1).all()]
    kb = arms.index(baseline)
    draws = powerlaw.seed_resamples(len(seeds))
    boot_best = best_points(powerlaw.resample(np.nan_to_num(vals), draws), complete)  # (B,R,K,S)
    point_best = best_points(vals[None], complete)[0]  # (R,K,S)
    gaps: dict[tuple[str, str], powerlaw.Estimate | None] = {}
    for i, r in enumerate(rungs):
        for k, arm in enumerate(arms):
            if arm == baseline or not (complete[i, k].any() and complete[i, kb].any()):
                gaps[(r, arm)] = None
                continue
            diff = (point_best[i, k] - point_best[i, kb]).mean()
            reps = (boot_best[:, i, k] - boot_best[:, i, kb]).mean(-1)
            gaps[(r, arm)] = _gap_estimate(diff, reps, len(seeds))
    result = LadderResult(key, rungs, arms, baseline, seeds, table, gaps, [], [], used, "", incomplete)
    if len(rungs) < MIN_RUNGS:
        result.refused = result.note = (
            f"a ladder of {len(rungs)} size(s) is not fitted: the curve E + A·N^(−α) needs at least "
            f"{MIN_RUNGS} (hydra.sweeper.ladder.{'depths' if key == DEPTH_KEY else 'widths'})"
        )
        return result
    try:
        for arm in arms:
            known = {r: table[(r, arm)].n for r in rungs if table[(r, arm)].n is not None}
            check_sizes(rungs, known, arm)  # type: ignore[arg-type]
    except LadderError as err:
        result.refused = result.note = str(err)
        return result
    if len(used) < MIN_RUNGS:
        result.note = (
            f"no fit: {len(used)} of {len(rungs)} rungs have a complete LR for every arm "
            f"(the fit needs {MIN_RUNGS})"
        )
        return result
    idx = [rungs.index(r) for r in used]
    if any(table[(r, a)].n is None for r in used for a in arms):
        result.note = "no fit: a rung's model size could not be read from its jobs' .hydra/config.yaml"
        return result
    log_n = np.log10(np.array([table[(r, baseline)].n for r in used], dtype=float))
    for k, arm in enumerate(arms):
        if arm != baseline:
            last = gaps[(used[-1], arm)]
            point_gap = (point_best[idx, k] - point_best[idx, kb]).mean(-1)  # (R,)
            boot_gap = (boot_best[:, idx, k] - boot_best[:, idx, kb]).mean(-1)  # (B, R)
            result.trends.append(trend(arm, baseline, log_n, point_gap, boot_gap, last, len(seeds)))
    sizes = {
        "N": np.array([[table[(r, a)].n for r in used] for a in arms], dtype=float),  # (K, R)
        "C": np.array([[table[(r, a)].flops or math.nan for r in used] for a in arms], dtype=float),
    }
    n_seeds = len(seeds)
    for against, size in sizes.items():
        if not np.isfinite(size).all():
            result.fits += [ArmFit(a, against, None, None, None, "no token count") for a in arms]
            continue
        point = fit_curves(size, point_best[idx][None])  # batch (1, K)
        boot = fit_curves(size, boot_best[:, idx])  # batch (B, K)
        models = {}
        for k, arm in enumerate(arms):
            fit, model = arm_fit(
                arm, against, point, boot, k, n_seeds, size, point_best[idx], boot_best[:, idx]
            )
            result.fits.append(fit)
            models[arm] = model
        if against == "N":
            result.curves = models
            for arm in arms:
                if arm != baseline:
                    ext = extrapolate(arm, baseline, models[arm], models[baseline], size[kb], n_seeds)
                    result.extrapolations.append(ext)
            result.held_out = held_out(used, arms, kb, size, point_best[idx], boot_best[:, idx], n_seeds)
    return result
