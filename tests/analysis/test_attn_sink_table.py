"""The report's attention-sink table (Qiu et al. 2025's question asked of a sweep) against numbers
written here: each seed's sink per block at its last attention step, at the arm's best LR; the
block mean's interval and the paired (arm − baseline) interval recomputed with scipy."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from gptlab.analysis.sweep.arms import ArmSummary, Cell, LRPoint
from gptlab.analysis.sweep.attention import last_sink, sink_table
from gptlab.analysis.sweep.jobs import Job
from gptlab.analysis.sweep.tables import parse_table

SEEDS = ["1", "2", "3"]


def _job(loss: float, sinks: dict[int, list[float]], gates: dict[int, list[float]] | None = None) -> Job:
    """A finished job whose csv logged attn_sink/block_b (and attn_gate/block_b) at the steps given."""
    log: dict[str, list[tuple[int, float]]] = {}
    for step, values in sorted(sinks.items()):
        for b, v in enumerate(values):
            log.setdefault(f"attn_sink/block_{b:02d}", []).append((step, v))
        log.setdefault("attn_entropy/block_00", []).append((step, 9.0))  # not a sink: ignored
    for step, values in sorted((gates or {}).items()):
        for b, v in enumerate(values):
            log.setdefault(f"attn_gate/block_{b:02d}", []).append((step, v))
    metrics = {"status": "finished", "final_val_loss": loss, "diverged": False}
    return Job(name="x", path=None, overrides=[], metrics=metrics, status="finished", log=log)


def _t_ci(values: list[float]) -> tuple[float, float]:
    a = np.asarray(values)
    half = stats.t.ppf(0.975, len(a) - 1) * a.std(ddof=1) / math.sqrt(len(a))
    return a.mean() - half, a.mean() + half


def test_last_sink_reads_the_last_step_every_block_logged() -> None:
    job = _job(2.0, {0: [0.1, 0.1], 300: [0.5, 0.7], 100: [0.2, 0.3]}, gates={300: [0.2, 0.4]})
    got = last_sink(job)
    assert got is not None and got.step == 300 and got.blocks == [0.5, 0.7]
    assert got.mean == pytest.approx(0.6) and got.gate == pytest.approx(0.3)
    partial = _job(2.0, {100: [0.2, 0.3]})
    partial.log["attn_sink/block_00"].append((200, 0.9))  # block 1 has no step 200: not a full step
    assert last_sink(partial).step == 100  # type: ignore[union-attr]
    assert last_sink(Job(name="y", path=None, overrides=[], status="finished")) is None


def test_sink_table_is_the_seed_mean_at_each_arms_best_lr_with_paired_delta() -> None:
    base_sinks = [[0.30, 0.50], [0.34, 0.46], [0.28, 0.60]]
    gated_sinks = [[0.05, 0.10], [0.07, 0.05], [0.02, 0.12]]
    base_lo, base_hi, gated_lo, gated_hi = LRPoint(1e-3), LRPoint(3e-3), LRPoint(1e-3), LRPoint(3e-3)
    for s, b, g in zip(SEEDS, base_sinks, gated_sinks, strict=True):
        base_lo.jobs[s] = _job(2.4, {300: [0.9, 0.9]})  # base's worse LR: never shown
        base_hi.jobs[s] = _job(2.2, {0: [0.0, 0.0], 300: b})
        gated_lo.jobs[s] = _job(2.1, {0: [0.0, 0.0], 300: g}, gates={300: [0.25, 0.35]})
        gated_hi.jobs[s] = _job(2.3, {300: [0.8, 0.8]}, gates={300: [0.9, 0.9]})
    arms = [ArmSummary("base", [base_lo, base_hi], SEEDS, math.log(256)),
            ArmSummary("gated", [gated_lo, gated_hi], SEEDS, math.log(256))]  # fmt: skip
    text = "## t\n\n" + sink_table(Cell({}, arms, "base"))  # type: ignore[operator]
    rows = {r["arm"]: r for r in parse_table(text, "## t")}
    base_mean = [sum(v) / 2 for v in base_sinks]
    gated_mean = [sum(v) / 2 for v in gated_sinks]
    assert rows["`base`"]["LR"] == "0.003" and rows["`gated`"]["LR"] == "0.001"
    assert rows["`base`"]["step"] == "300" and rows["`base`"]["seeds"] == "3"
    assert float(rows["`gated`"]["block 1"]) == pytest.approx(np.mean([v[1] for v in gated_sinks]), abs=6e-4)
    lo, hi = _t_ci(base_mean)
    assert rows["`base`"]["mean over blocks"] == f"{np.mean(base_mean):.3f} [{lo:.3f}, {hi:.3f}]"
    lo, hi = _t_ci([g - b for g, b in zip(gated_mean, base_mean, strict=True)])  # paired by seed
    diff = np.mean(gated_mean) - np.mean(base_mean)
    assert rows["`gated`"]["Δ vs baseline"] == f"{diff:.3f} [{lo:.3f}, {hi:.3f}]"
    assert rows["`base`"]["Δ vs baseline"] == "—" and rows["`base`"]["gate mean"] == "—"
    assert float(rows["`gated`"]["gate mean"]) == pytest.approx(0.30)


def test_no_telemetry_no_table() -> None:
    point = LRPoint(1e-3)
    for s in SEEDS:
        point.jobs[s] = _job(2.0, {})
    assert sink_table(Cell({}, [ArmSummary("base", [point], SEEDS, math.log(256))], "base")) is None
