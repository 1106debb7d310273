"""The ladder part of report.md: per-rung table, the fitted curves, the extrapolated gap and its
verdict, and the log-log figure (definitions in gptlab.analysis.ladder.fit)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from gptlab.analysis.ladder import powerlaw
from gptlab.analysis.ladder.fit import EXTRAPOLATE, HOLD_FRACTION
from gptlab.analysis.ladder.records import LadderResult
from gptlab.analysis.stats import mean_interval
from gptlab.analysis.sweep.tables import EMPTY, fmt_interval, table

NOTE = (
    "Per rung, each arm at its own best LR (lowest mean over the LRs where every seed has a result; "
    '"(grid edge)" when it is the rung\'s smallest or largest LR). N: non-embedding parameters of the '
    "job's model; C: training FLOPs, (6·N + 12·L·T·d) × tokens. Loss: mean [95% t CI] over seeds. "
    "Gap and every fitted quantity: estimate [95% CI] by a bootstrap over seeds (one draw of seeds for "
    "every rung and arm, the best LR picked again in each resample; estimate ± t(n−1)·SE, "
    "gptlab.analysis.ladder.powerlaw). Fit: L = E + A·N^(−α) by least squares on the per-seed losses. "
    f"Extrapolation: the gap of the fitted curves at {EXTRAPOLATE:g}× the largest rung's N; change = "
    "s·(gap there − gap at the largest rung), s the sign of the gap at the largest rung (> 0: the "
    f"gap widens). Verdict: flips (the extrapolated gap's CI on the other side of 0), widens/narrows "
    f"(the change's CI above/below 0), holds (the change's CI inside ±{HOLD_FRACTION:.0%} of the "
    "gap), else inconclusive; incomplete when a planned job has no result."
)


TREND_NOTE = (
    "Without a curve per arm: the least-squares slope of the measured gap (per rung, each arm at its "
    "best LR) on log10 N, i.e. its change per 10× N across the rungs, with the same bootstrap over seeds. "
    "Widens / narrows over the rungs: the slope's CI on the side of 0 where the largest rung's gap "
    "lies / on the other side (noted when that gap's own CI holds 0); it says nothing beyond the "
    "largest rung."
)


def _n(value: float | None) -> str:
    return EMPTY if value is None else f"{value:,.0f}"


def _sci(value: float | None) -> str:
    return EMPTY if value is None or not math.isfinite(value) else f"{value:.3g}"


def fmt_estimate(e: powerlaw.Estimate | None, digits: int = 4, sci: bool = False) -> str:
    if e is None:
        return EMPTY
    f = (lambda v: f"{v:.3g}") if sci else (lambda v: f"{v:+.{digits}f}" if digits < 0 else f"{v:.{digits}f}")
    if not math.isfinite(e.low):
        return f"{f(e.value)} (no CI)"
    share = f" ({e.finite_share:.0%} of resamples)" if e.finite_share < 1 else ""
    return f"{f(e.value)} [{f(e.low)}, {f(e.high)}]{share}"


def rung_table(res: LadderResult, what: str = "final val loss") -> str:
    """Per rung: N, tokens, C, each arm's best LR and `what` there (mean [95% CI]), the gaps."""
    head = ["rung", "N", "tokens", "C (FLOPs)"]
    for a in res.arms:
        head += [f"`{a}` best LR", f"`{a}` {what}"]
    head += [f"`{a}` − `{res.baseline}`" for a in res.arms if a != res.baseline]
    rows = []
    for r in res.rungs:
        entries = [res.table[(r, a)] for a in res.arms]
        ns = {e.n for e in entries if e.n is not None}
        n_text = _n(next(iter(ns))) if len(ns) == 1 else " / ".join(_n(e.n) for e in entries)
        flops = {e.flops for e in entries if e.flops is not None}
        c_text = _sci(next(iter(flops))) if len(flops) == 1 else " / ".join(_sci(e.flops) for e in entries)
        row = [f"{res.key}={r}" + (" (incomplete)" if r in res.incomplete else ""), n_text,
               _n(entries[0].tokens), c_text]  # fmt: skip
        for e in entries:
            edge = " (grid edge)" if e.best_at_edge else ""
            lr = EMPTY if e.best_lr is None else f"{e.best_lr:.3g}{edge}"
            loss = fmt_interval(mean_interval(list(e.points.values()))) if e.points else EMPTY
            row += [lr, loss]
        row += [fmt_estimate(res.gaps.get((r, a))) for a in res.arms if a != res.baseline]
        rows.append(row)
    return table(head, rows)


def fit_table(res: LadderResult) -> str:
    head = ["arm", "against", "E [95% CI]", "A [95% CI]", "α [95% CI]", "b in L = c − b·ln N [95% CI]", "fit"]
    rows = [
        [f"`{f.arm}`", f.against, fmt_estimate(f.E), fmt_estimate(f.A, sci=True), fmt_estimate(f.alpha, 3),
         fmt_estimate(f.slope), f.status]
        for f in res.fits
    ]  # fmt: skip
    return table(head, rows)


def extrapolation_table(res: LadderResult) -> str:
    head = ["arm", "baseline", "gap at largest rung (fit)", f"gap at {EXTRAPOLATE:g}× N", "change",
            "crossover N", "verdict"]  # fmt: skip
    rows = []
    for x in res.extrapolations:
        cross = "none in range" if x.crossover is None else fmt_estimate(x.crossover, sci=True)
        verdict = x.verdict
        if res.incomplete:
            rungs = ", ".join(f"{res.key}={r}" for r in res.incomplete)
            verdict = f"incomplete ({rungs}: planned jobs without a result): {verdict}"
        rows.append([
            f"`{x.arm}`", f"`{x.baseline}`", fmt_estimate(x.gap_last), fmt_estimate(x.gap_ext) +
            f" at N={x.n_ext:,.0f}", fmt_estimate(x.change), cross, verdict,
        ])  # fmt: skip
    return table(head, rows)


def trend_table(res: LadderResult) -> str:
    head = ["arm", "baseline", "gap at the largest rung", "gap's change per 10× N over the rungs [95% CI]",
            "over the rungs"]  # fmt: skip
    rows = [
        [f"`{t.arm}`", f"`{t.baseline}`", fmt_estimate(res.gaps.get((res.used[-1], t.arm))),
         fmt_estimate(t.per_decade), t.verdict]
        for t in res.trends
    ]  # fmt: skip
    return table(head, rows)


HELD_OUT_NOTE = (
    "The ladder judged by a rung it did not see: the curves are fitted (as above) on every rung but the "
    "held-out one, and forecast it: each arm's loss at its own N, the gap at the baseline's N. "
    "Forecast and measured value (each arm at its best LR, mean over seeds) carry the same bootstrap over "
    "seeds; error = measured − forecast; covered: the forecast's interval holds the measured value. "
    "The interval holds seed noise only, so a miss says the curve's form (or the best LR's placement) "
    "failed, not the seeds. The largest rung is held out when 3 others remain; with 5 or more rungs "
    "the second largest too (leave-one-out)."
)


def held_out_table(res: LadderResult) -> str:
    head = ["held-out rung", "fitted on", "quantity", "forecast [95% CI]", "measured [95% CI]", "error",
            "covered", "curve"]  # fmt: skip
    rows = []
    for h in res.held_out:
        fitted = ", ".join(h.fitted_on)
        for f in h.rows:
            covered = EMPTY if f.covered is None else ("yes" if f.covered else "**no**")
            error = EMPTY if f.error is None else f"{f.error:+.4f}"
            rung = f"{res.key}={h.rung} (N={h.n:,.0f})"
            rows.append([rung, fitted, f"`{f.what}`", fmt_estimate(f.forecast), fmt_estimate(f.measured),
                         error, covered, f.kind])  # fmt: skip
    return table(head, rows)


def ladder_title(experiment: str, extrapolated: bool) -> str:
    """The figure's title names the dashed extrapolation only when a curve was fitted and drawn."""
    if extrapolated:
        return f"{experiment}: loss against size (dashed: extrapolated to {EXTRAPOLATE:g}× N)"
    return f"{experiment}: loss against size (no curve fits: points only)"


def ladder_figure(res: LadderResult, experiment: str, out: Path) -> Path | None:
    """Final val loss against N, log-log: points (mean, 95% t CI over seeds) per arm, the fitted
    curve over the rungs (solid) and extrapolated to EXTRAPOLATE × the largest N (dashed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    fits = {f.arm: f for f in res.fits if f.against == "N"}
    for i, arm in enumerate(res.arms):
        color = f"C{i}"
        xs, ys, lo, hi = [], [], [], []
        for r in res.rungs:
            e = res.table[(r, arm)]
            if e.n is None or not e.points:
                continue
            ci = mean_interval(list(e.points.values()))
            xs.append(e.n)
            ys.append(ci.mean)
            lo.append(ci.mean - ci.low if math.isfinite(ci.low) else 0.0)
            hi.append(ci.high - ci.mean if math.isfinite(ci.high) else 0.0)
        if xs:
            ax.errorbar(xs, ys, yerr=[lo, hi], fmt="o", color=color, capsize=3, label=f"{arm} (mean, 95% CI)")
        f = fits.get(arm)
        if f is not None and f.curve is not None and xs:
            n_max = max(xs)
            inside = np.geomspace(min(xs), n_max, 100)
            beyond = np.geomspace(n_max, EXTRAPOLATE * n_max, 50)
            if f.E is not None and f.A is not None and f.alpha is not None:
                name = f"{arm}: {f.E.value:.3f} + {f.A.value:.3g}·N^(−{f.alpha.value:.3f})"
            else:
                name = f"{arm}: α → 0 limit, −{f.slope.value:.4f}·ln N" if f.slope else arm
            ax.plot(inside, f.curve(inside), "-", color=color, label=name)
            ax.plot(beyond, f.curve(beyond), "--", color=color)
    extrapolated = any(fits.get(a) and fits[a].curve is not None for a in res.arms)
    if extrapolated:
        n_top = max(e.n for e in res.table.values() if e.n is not None)
        ax.axvline(EXTRAPOLATE * n_top, color="grey", lw=0.8, ls=":")
    ax.set_xscale("log")
    ax.set_yscale("log")
    from matplotlib.ticker import FormatStrFormatter

    ax.yaxis.set_major_formatter(FormatStrFormatter("%.2f"))  # plain numbers, not 2.1×10^0
    ax.yaxis.set_minor_formatter(FormatStrFormatter("%.2f"))
    ax.set_xlabel("non-embedding parameters N (log)")
    ax.set_ylabel("final val loss at the best LR (log)")
    ax.set_title(ladder_title(experiment, extrapolated))
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    path = out / f"{experiment}_loss_vs_n.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


TASK_NOTE = (
    'The first step of the task ladder of Bhagia et al. 2024 ("Establishing Task Scaling Laws via '
    "Compute-Efficient Model Ladders\"): a task's own loss predicted from the model's size, from which "
    "their second step (not done here) predicts the accuracy. The task's bpb of the right continuation "
    "(metrics.json `tasks`) takes the place of the final val loss above, with the same rules: per rung "
    "each arm at its best LR by the task's bpb (lowest mean over seeds, among the LRs where every seed "
    "has it), the same fit L = E + A·N^(−α) on the per-seed values, the same bootstrap over seeds, "
    "extrapolation and verdict. Their fit takes N and the tokens D; each rung's D is the ladder's, so "
    "here N alone is the variable (the C rows refit against training FLOPs)."
)


def task_ladder_lines(res: LadderResult, task: str) -> list[str]:
    """The ladder of one task's bpb (`res` analysed with the task's bpb as each job's result)."""
    what = f"`{task}` bpb"
    lines = [f"### Task `{task}`: bpb against N", "", TASK_NOTE]
    lines += ["", f"#### {what} per rung", "", rung_table(res, what)]
    if res.note:
        return lines + ["", f"**No fit**: {res.note}."]
    lines += ["", f"#### {what}: fitted curves", "", fit_table(res)]
    lines += ["", f"#### {what}: the gap extrapolated", "", extrapolation_table(res)]
    if res.held_out:
        lines += [
            "",
            f"#### {what}: held-out rung, the fit's forecast against the run",
            "",
            held_out_table(res),
        ]
    return lines


def ladder_lines(res: LadderResult) -> list[str]:
    lines = ["## Ladder", "", NOTE, "", "### Per rung", "", rung_table(res)]
    if res.trends:
        lines += ["", "### The gap over the rungs", "", TREND_NOTE, "", trend_table(res)]
    if res.note:
        lines += ["", f"**No fit**: {res.note}."]
        return lines
    lines += ["", "### Fitted curves", "", fit_table(res)]
    lines += ["", "### The gap extrapolated", "", extrapolation_table(res)]
    if res.held_out:
        lines += ["", "### Held-out rung: the fit's forecast against the run", "", HELD_OUT_NOTE, ""]
        lines += [held_out_table(res)]
    return lines
