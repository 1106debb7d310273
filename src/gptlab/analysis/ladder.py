"""A ladder sweep's answer: does an arm's difference from the baseline widen, narrow, hold or flip
with model size?

Per rung (a width of `hydra.sweeper.ladder`) each arm's best LR is picked as in the plain report
(lowest mean over the LRs where every seed has a result); the per-seed final val losses there are
the points. Per arm, L(N) = E + A·N^(−α) is fitted to those points against the non-embedding
parameters N of each job's model (`GPT.num_params(exclude_embedding=True)`), and again against the
training FLOPs C = (6·N + 12·L·T·d)·tokens (`GPT.flops_per_token`, PaLM's count). Intervals come
from the bootstrap over seeds of `gptlab.analysis.powerlaw` (one draw of seeds for every rung and
arm; estimate ± t(n−1)·SE). In every resample the best LR of each (rung, arm) is *picked again*
from the resampled means: the point estimate picks it from the data, so its sampling variation
includes that choice, and an interval that held the LR fixed would leave it out.

Verdict, for each arm against the baseline. g(N) = fitted L_arm(N) − L_base(N); s = the sign of
g at the largest rung; the change is D = s·(g(10·N_max) − g(N_max)), with its interval:
- *inconclusive* when a fit did not converge, when the gap at the largest rung (fitted) is not
  resolved (its interval holds 0: there is no difference whose trend to call), or when D's
  interval holds 0 but reaches beyond ±HOLD_FRACTION·|g(N_max)|;
- *flips* when g(10·N_max)'s interval lies wholly on the other side of 0;
- *widens* when D's interval is above 0, *narrows* when below;
- *holds* when D's interval holds 0 and lies within ±HOLD_FRACTION·|g(N_max)|.
When a planned job has no result, the verdict is prefixed "incomplete" (the rule of the plain
report: a best LR may have come from a partial curve).

A power law can only slow down in ln N. When an arm's losses do not (α runs to the search's lower
bound: no E can be fitted), the arm gets the law's α → 0 limit L = c − b·ln N instead, fitted to
the same points with the same bootstrap, labelled in the fit table and in the verdict: it
extrapolates a loss that falls without bound, so it says what the ladder's own trend implies at
10× N, not where the curve must end.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import yaml

from gptlab.ablation.grid import DEPTH_KEY
from gptlab.analysis import powerlaw
from gptlab.analysis.arms import RESULT, Cell, outcome
from gptlab.analysis.jobs import Job

MIN_RUNGS = 3  # a 3-parameter curve needs at least 3 sizes
EXTRAPOLATE = 10.0  # the gap is extrapolated to this multiple of the largest rung's N
HOLD_FRACTION = 0.5  # "holds": the change stays within this share of the gap at the largest rung
CROSS_RANGE = (1.0, 1000.0)  # crossover searched from the smallest rung to 1000 × the largest


class LadderError(ValueError):
    """The ladder cannot be fitted as planned (too few sizes, sizes not increasing in N): one line."""


@dataclass
class RungArm:
    """One arm at one rung: its model's size and the jobs' losses by LR and seed."""

    n: float | None  # non-embedding parameters
    flops_per_token: float | None
    tokens: float | None
    best_lr: float | None = None
    best_at_edge: bool = False
    points: dict[str, float] = field(default_factory=dict)  # seed → final val loss at the best LR

    @property
    def flops(self) -> float | None:
        if self.flops_per_token is None or self.tokens is None:
            return None
        return self.flops_per_token * self.tokens


@dataclass
class ArmFit:
    arm: str
    against: str  # "N" or "C"
    E: powerlaw.Estimate | None
    A: powerlaw.Estimate | None
    alpha: powerlaw.Estimate | None
    status: str  # "converged", or why there is no number
    slope: powerlaw.Estimate | None = None  # b of the log-linear limit L = c − b·ln N, when fitted
    curve: Any = None  # the point estimate's curve, n (array) → loss (for the figure)


@dataclass
class Extrapolation:
    arm: str
    baseline: str
    n_max: float
    n_ext: float
    gap_last: powerlaw.Estimate | None
    gap_ext: powerlaw.Estimate | None
    change: powerlaw.Estimate | None
    crossover: powerlaw.Estimate | None
    verdict: str


@dataclass
class LadderResult:
    key: str  # the rung key (model.n_embd)
    rungs: list[str]  # rung values in ladder order
    arms: list[str]
    baseline: str
    seeds: list[str]
    table: dict[tuple[str, str], RungArm]  # (rung, arm) →
    gaps: dict[tuple[str, str], powerlaw.Estimate | None]  # (rung, arm) → arm − baseline at best LRs
    fits: list[ArmFit]
    extrapolations: list[Extrapolation]
    used: list[str]  # rungs in the fit (every arm has a complete LR there)
    note: str  # why no fit, when there is none
    incomplete: list[str]  # rungs where a planned job has no result
    refused: str = ""  # the ladder as planned cannot be fitted (bad input: the CLI exits 2)
    trends: list[Trend] = field(default_factory=list)  # the measured gap against ln N, no curve
    held_out: list[HeldOut] = field(default_factory=list)  # forecasts of rungs left out of the fit
    curves: dict[str, Any] = field(default_factory=dict)  # arm → its Model against N (None: no curve)


@dataclass
class Forecast:
    """One quantity at a held-out rung: the fit's forecast and the measurement, both with the
    bootstrap-over-seeds interval; `covered`: the forecast's interval holds the measured value."""

    what: str  # an arm, or "arm − baseline"
    kind: str  # the curve it came from ("power law", "log-linear limit"), or why there is none
    forecast: powerlaw.Estimate | None
    measured: powerlaw.Estimate | None

    @property
    def error(self) -> float | None:
        """measured − forecast."""
        if self.forecast is None or self.measured is None:
            return None
        return self.measured.value - self.forecast.value

    @property
    def covered(self) -> bool | None:
        f, m = self.forecast, self.measured
        if f is None or m is None or not math.isfinite(f.low):
            return None
        return f.low <= m.value <= f.high


@dataclass
class HeldOut:
    """A rung left out of the fit (the largest; with 5 or more rungs also the second largest, fitted
    on every other rung), its forecasts against what it measured."""

    rung: str
    n: float
    fitted_on: list[str]
    rows: list[Forecast]


@dataclass
class Trend:
    """How the measured gap (arm − baseline, each at its best LR, per rung) moves across the rungs:
    the least-squares slope of the gap on log10 N, i.e. its change per 10× N, with the bootstrap
    over seeds; no curve per arm is needed (it holds when the losses fit no law)."""

    arm: str
    baseline: str
    per_decade: powerlaw.Estimate
    verdict: str  # widens / narrows over the rungs (the slope's CI on the gap's side of 0 / the
    # other, the side read from the largest rung's gap), or no trend resolved


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
    n_lr = len(cells[0].arms[0].points) if cells else 0
    vals = np.full((len(rungs), len(arms), n_lr, len(seeds)), np.nan)
    for i, r in enumerate(rungs):
        for k, a in enumerate(by_rung[r].arms):
            for li, p in enumerate(a.points):
                res = p.results()
                for si, s in enumerate(seeds):
                    if s in res:
                        vals[i, k, li, si] = res[s]
    complete = np.isfinite(vals).all(-1)
    used = [r for i, r in enumerate(rungs) if complete[i].any(-1).all()]
    kb = arms.index(baseline)
    draws = powerlaw.seed_resamples(len(seeds))
    boot_best = _best_points(powerlaw.resample(np.nan_to_num(vals), draws), complete)  # (B,R,K,S)
    point_best = _best_points(vals[None], complete)[0]  # (R,K,S)
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
            result.trends.append(_trend(arm, baseline, log_n, point_gap, boot_gap, last, len(seeds)))
    sizes = {
        "N": np.array([[table[(r, a)].n for r in used] for a in arms], dtype=float),  # (K, R)
        "C": np.array([[table[(r, a)].flops or math.nan for r in used] for a in arms], dtype=float),
    }
    n_seeds = len(seeds)
    for against, size in sizes.items():
        if not np.isfinite(size).all():
            result.fits += [ArmFit(a, against, None, None, None, "no token count") for a in arms]
            continue
        point = _fit(size, point_best[idx][None])  # batch (1, K)
        boot = _fit(size, boot_best[:, idx])  # batch (B, K)
        models = {}
        for k, arm in enumerate(arms):
            fit, model = _arm_fit(
                arm, against, point, boot, k, n_seeds, size, point_best[idx], boot_best[:, idx]
            )
            result.fits.append(fit)
            models[arm] = model
        if against == "N":
            result.curves = models
            for arm in arms:
                if arm != baseline:
                    ext = _extrapolate(arm, baseline, models[arm], models[baseline], size[kb], n_seeds)
                    result.extrapolations.append(ext)
            result.held_out = held_out(used, arms, kb, size, point_best[idx], boot_best[:, idx], n_seeds)
    return result


def held_out(
    used: list[str], arms: list[str], kb: int, size: np.ndarray, point_y: np.ndarray, boot_y: np.ndarray,
    n: int,
) -> list[HeldOut]:  # fmt: skip
    """Forecast the largest rung from a fit on the others (when at least MIN_RUNGS remain), and with
    5 or more rungs the second largest too (leave-one-out): each arm's loss at its own N and the gap
    at the baseline's N, the curves and their bootstrap exactly as the extrapolation's, the
    measurement's interval from the same resamples (`point_y` (R, K, S), `boot_y` (B, R, K, S),
    `size` (K, R))."""
    if len(used) - 1 < MIN_RUNGS:
        return []
    out = []
    for h in [len(used) - 1] + ([len(used) - 2] if len(used) >= 5 else []):
        keep = [i for i in range(len(used)) if i != h]
        sz, py, by = size[:, keep], point_y[keep], boot_y[:, keep]
        point, boot = _fit(sz, py[None]), _fit(sz, by)
        models = [_arm_fit(a, "N", point, boot, k, n, sz, py, by) for k, a in enumerate(arms)]
        rows = []
        for k, arm in enumerate(arms):
            fit, model = models[k]
            measured = powerlaw.estimate(float(point_y[h, k].mean()), boot_y[:, h, k].mean(-1), n)
            kind, forecast = (fit.status, None) if model is None else _forecast(model, None, size[k, h], n)
            rows.append(Forecast(arm, kind, forecast, measured))
        for k, arm in enumerate(arms):
            if k == kb:
                continue
            diff = point_y[h, k] - point_y[h, kb]
            measured = powerlaw.estimate(float(diff.mean()), (boot_y[:, h, k] - boot_y[:, h, kb]).mean(-1), n)
            model, base = models[k][1], models[kb][1]
            if model is None or base is None:
                names = ", ".join(a for a, m in ((arm, model), (arms[kb], base)) if m is None)
                kind, forecast = f"no falling curve for {names}", None
            else:
                kind, forecast = _forecast(model, base, size[kb, h], n)
            rows.append(Forecast(f"{arm} − {arms[kb]}", kind, forecast, measured))
        out.append(HeldOut(used[h], float(size[kb, h]), [used[i] for i in keep], rows))
    return out


def forecast_at(res: LadderResult, n: float) -> list[Forecast]:
    """Each arm's fitted loss and each gap at a size the ladder has not run (a rung to come), with the
    bootstrap interval: what a held-out rung's section will hold as its forecast (no measurement)."""
    if not res.curves:
        return []
    rows = []
    for arm in res.arms:
        model = res.curves.get(arm)
        kind, fc = ("no falling curve", None) if model is None else _forecast(model, None, n, len(res.seeds))
        rows.append(Forecast(arm, kind, fc, None))
    base = res.curves.get(res.baseline)
    for arm in res.arms:
        model = res.curves.get(arm)
        if arm == res.baseline:
            continue
        if model is None or base is None:
            rows.append(Forecast(f"{arm} − {res.baseline}", "no falling curve", None, None))
        else:
            rows.append(Forecast(f"{arm} − {res.baseline}", *_forecast(model, base, n, len(res.seeds)), None))
    return rows


def _forecast(model: Model, base: Model | None, at: float, n: int) -> tuple[str, powerlaw.Estimate]:
    """(the curves' kind, Estimate) of a curve at N = `at`, minus `base`'s there for a gap."""
    x = np.array(at)
    point = float(model.point(x)[0]) - (float(base.point(x)[0]) if base else 0.0)
    ok = model.valid & (base.valid if base else True)
    reps = model.boot(x) - (base.boot(x) if base else 0.0)
    kinds = sorted({m.kind for m in (model, base) if m is not None})
    return " / ".join(kinds), powerlaw.estimate(point, np.where(ok, reps, np.nan), n)


def _best_points(values: np.ndarray, complete: np.ndarray) -> np.ndarray:
    """(B, R, K, S) per-seed losses at the best LR of each (resample, rung, arm): the lowest mean
    among the complete LRs (NaN where an arm has none at a rung)."""
    means = np.where(complete[None], values.mean(-1), np.inf)  # (B, R, K, LR)
    best = np.argmin(means, axis=-1)  # (B, R, K)
    picked = np.take_along_axis(values, best[..., None, None], axis=-2)[..., 0, :]
    return np.where(complete.any(-1)[None, ..., None], picked, np.nan)


def _fit(size: np.ndarray, points: np.ndarray) -> powerlaw.Fit:
    """Fit every (batch, arm): points (B, R, K, S) at sizes (K, R) → a Fit of batch shape (B, K)."""
    b, r, k, s = points.shape
    y = np.moveaxis(points, 2, 1).reshape(b, k, r * s)  # (B, K, R·S)
    n = np.repeat(size, s, axis=1)  # (K, R·S)
    return powerlaw.fit_power_law(n, y)


@dataclass
class Model:
    """One arm's fitted curve, point estimate and resamples: `point(n)` → (1,), `boot(n)` → (B,)
    (n broadcast in front: a (G, 1) grid gives (G, 1) and (G, B)); `valid`: (B,) resamples whose
    fit is usable; `kind`: "power law" or "log-linear limit"; None when the arm has no usable fit."""

    point: Any
    boot: Any
    valid: np.ndarray
    kind: str


def _valid(fit: powerlaw.Fit) -> np.ndarray:
    return fit.converged & (fit.A > 0)


def _arm_fit(
    arm: str, against: str, point: powerlaw.Fit, boot: powerlaw.Fit, k: int, n: int,
    size: np.ndarray, point_y: np.ndarray, boot_y: np.ndarray,
) -> tuple[ArmFit, Model | None]:  # fmt: skip
    """The arm's row of the fit table, and its curve for the extrapolation. A power law whose α runs
    to the lower bound (the losses fall with ln N without slowing down: no E can be fitted) is
    replaced by its α → 0 limit L = c − b·ln N, fitted to the same points and labelled as such;
    on the upper bound (a step) or with A <= 0 there is no curve."""
    if not point.converged[0, k] and point.alpha[0, k] < 2 * powerlaw.ALPHA_MIN:
        limit_p = _fit_limit(size, point_y[None])
        limit_b = _fit_limit(size, boot_y)
        ok = limit_b.b[:, k] > 0
        slope = powerlaw.estimate(float(limit_p.b[0, k]), limit_b.b[:, k], n)
        why = "α → 0 (no slowing over the rungs, no E): its limit L = c − b·ln N fitted"
        row = ArmFit(arm, against, None, None, None, why, slope=slope)
        if not limit_p.b[0, k] > 0:
            row.status = "the loss rises with size (b <= 0 in L = c − b·ln N): no falling curve"
            return row, None

        def at(fit: powerlaw.LogLinearFit):  # noqa: ANN202
            return lambda x: fit.predict(np.asarray(x)[..., None])[..., k]

        row.curve = at(limit_p)
        return row, Model(at(limit_p), at(limit_b), ok, "log-linear limit")
    if not point.converged[0, k]:
        return ArmFit(
            arm, against, None, None, None, f"not converged (α at its search bound {point.alpha[0, k]:.3g})"
        ), None
    if not point.A[0, k] > 0:
        return ArmFit(arm, against, None, None, None, "A <= 0: the loss does not fall with size"), None
    ok = _valid(boot)[:, k]

    def est(values: np.ndarray, p: float, log: bool = False) -> powerlaw.Estimate:
        return powerlaw.estimate(p, np.where(ok, values[:, k], np.nan), n, log=log)

    status = "converged" if ok.mean() == 1 else f"converged ({ok.mean():.0%} of resamples)"
    row = ArmFit(
        arm, against, est(boot.E, float(point.E[0, k])), est(boot.A, float(point.A[0, k]), log=True),
        est(boot.alpha, float(point.alpha[0, k])), status,
    )  # fmt: skip

    def curve(fit: powerlaw.Fit):  # noqa: ANN202
        return lambda x: fit.predict(np.asarray(x)[..., None])[..., k]

    row.curve = curve(point)
    return row, Model(curve(point), curve(boot), ok, "power law")


def _fit_limit(size: np.ndarray, points: np.ndarray) -> powerlaw.LogLinearFit:
    b, r, k, s = points.shape
    y = np.moveaxis(points, 2, 1).reshape(b, k, r * s)
    return powerlaw.fit_log_linear(np.repeat(size, s, axis=1), y)


def _crossover(curve: Any, other: Any, lo: float, hi: float) -> np.ndarray:
    """The smallest N in [lo, hi] where two fitted curves cross, per resample (NaN: none)."""
    grid = np.exp(np.linspace(math.log(lo), math.log(hi), 2001))
    diff = curve(grid[:, None]) - other(grid[:, None])  # (G, B)
    sign = np.sign(diff)
    change = sign[1:] != sign[:-1]
    out = np.full(diff.shape[1], np.nan)
    first = np.argmax(change, axis=0)
    for b in np.nonzero(change.any(0))[0]:  # interpolate the crossing in log N
        i = first[b]
        d0, d1 = diff[i, b], diff[i + 1, b]
        t = d0 / (d0 - d1) if d0 != d1 else 0.0
        out[b] = math.exp(math.log(grid[i]) + t * (math.log(grid[i + 1]) - math.log(grid[i])))
    return out


def _extrapolate(
    arm: str, baseline: str, model: Model | None, base: Model | None, base_sizes: np.ndarray, n: int
) -> Extrapolation:
    n_max = float(base_sizes.max())
    n_ext = EXTRAPOLATE * n_max
    if model is None or base is None:
        names = ", ".join(a for a, m in ((arm, model), (baseline, base)) if m is None)
        why = f"inconclusive: no falling curve fitted for {names} (the fit table says why)"
        return Extrapolation(arm, baseline, n_max, n_ext, None, None, None, None, why)
    ok = model.valid & base.valid

    def gap(which: str, at: float) -> np.ndarray:
        return getattr(model, which)(np.array(at)) - getattr(base, which)(np.array(at))

    last_p, ext_p = float(gap("point", n_max)[0]), float(gap("point", n_ext)[0])
    s = 1.0 if last_p >= 0 else -1.0
    last_b, ext_b = np.where(ok, gap("boot", n_max), np.nan), np.where(ok, gap("boot", n_ext), np.nan)
    gap_last = powerlaw.estimate(last_p, last_b, n)
    gap_ext = powerlaw.estimate(ext_p, ext_b, n)
    change = powerlaw.estimate(s * (ext_p - last_p), s * (ext_b - last_b), n)
    lo, hi = float(base_sizes.min()) * CROSS_RANGE[0], n_max * CROSS_RANGE[1]
    cross_p = float(_crossover(model.point, base.point, lo, hi)[0])
    cross_b = np.where(ok, _crossover(model.boot, base.boot, lo, hi), np.nan)
    crossover = None
    if math.isfinite(cross_p) or np.isfinite(cross_b).any():
        crossover = powerlaw.estimate(cross_p, cross_b, n, log=True)
    verdict = ladder_verdict(gap_last, gap_ext, change)
    limits = [name for name, m in ((arm, model), (baseline, base)) if m.kind == "log-linear limit"]
    if limits:
        verdict += (
            f" (on the log-linear limit for {', '.join(limits)}: no E, the loss falls with ln N unbounded)"
        )
    return Extrapolation(arm, baseline, n_max, n_ext, gap_last, gap_ext, change, crossover, verdict)


def _trend(
    arm: str, baseline: str, log_n: np.ndarray, point: np.ndarray, boot: np.ndarray,
    last: powerlaw.Estimate | None, n: int,
) -> Trend:  # fmt: skip
    """The gap's least-squares slope on log10 N over the rungs, and what it says (`Trend`)."""
    x = log_n - log_n.mean()

    def slope(y: np.ndarray) -> np.ndarray:
        return ((y - y.mean(-1, keepdims=True)) * x).sum(-1) / (x * x).sum()

    per = powerlaw.estimate(float(slope(point)), slope(boot), n)
    if last is None or not math.isfinite(per.low):
        return Trend(arm, baseline, per, "no interval")
    s = 1.0 if last.value > 0 else -1.0
    low, high = sorted((s * per.low, s * per.high))
    verdict = (
        "widens over the rungs" if low > 0 else "narrows over the rungs" if high < 0 else "no trend resolved"
    )
    if not last.excludes_zero:
        verdict += " (the largest rung's own gap is not resolved)"
    return Trend(arm, baseline, per, verdict)


def ladder_verdict(gap_last: powerlaw.Estimate, gap_ext: powerlaw.Estimate, change: powerlaw.Estimate) -> str:
    """widens / narrows / holds / flips / inconclusive (the rule in this module's docstring)."""
    if not all(math.isfinite(e.low) for e in (gap_last, gap_ext, change)):
        return "inconclusive: no interval (too few seeds or resamples that converged)"
    if not gap_last.excludes_zero:
        return "inconclusive: no resolved gap at the largest rung"
    s = 1.0 if gap_last.value > 0 else -1.0
    if (s > 0 and gap_ext.high < 0) or (s < 0 and gap_ext.low > 0):
        return "flips"
    if change.low > 0:
        return "widens"
    if change.high < 0:
        return "narrows"
    bound = HOLD_FRACTION * abs(gap_last.value)
    if -bound <= change.low and change.high <= bound:
        return "holds"
    return f"inconclusive: the change's interval reaches beyond ±{HOLD_FRACTION:.0%} of the gap"
