"""A ladder judged on sizes its fit did not see: a rung held out of the fit (the report's held-out
section) and a rung still to run (`scripts/ladder_forecast.py`), each arm's loss and each gap with
the bootstrap-over-seeds interval of the report's curves."""

from __future__ import annotations

import numpy as np

from gptlab.analysis.ladder import powerlaw
from gptlab.analysis.ladder.fit import MIN_RUNGS, arm_fit, fit_curves
from gptlab.analysis.ladder.records import Forecast, HeldOut, LadderResult, Model


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
        point, boot = fit_curves(sz, py[None]), fit_curves(sz, by)
        models = [arm_fit(a, "N", point, boot, k, n, sz, py, by) for k, a in enumerate(arms)]
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
