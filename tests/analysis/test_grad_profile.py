"""The report's per-block gradient profile (Xiong et al.'s Fig. 3 question) against numbers written
here: each seed's FFN gradient norm per block at its first telemetry step, averaged over seeds, at
the arm's best LR, and last/first computed by hand."""

from __future__ import annotations

import math

import pytest

from gptlab.analysis.init.grad_profile import first_profile, profile_table
from gptlab.analysis.sweep.arms import ArmSummary, Cell, LRPoint
from gptlab.analysis.sweep.jobs import Job
from gptlab.analysis.sweep.tables import parse_table


def _job(loss: float, profile: dict[int, list[float]]) -> Job:
    """A finished job whose csv logged grad_norm/block_b/ffn at the steps given (step → per block)."""
    log: dict[str, list[tuple[int, float]]] = {}
    for step, values in sorted(profile.items()):
        for b, v in enumerate(values):
            log.setdefault(f"grad_norm/block_{b:02d}/ffn", []).append((step, v))
        log.setdefault("grad_norm/total", []).append((step, 99.0))  # not a block: ignored
    metrics = {"status": "finished", "final_val_loss": loss, "diverged": False}
    return Job(name="x", path=None, overrides=[], metrics=metrics, status="finished", log=log)


def test_first_profile_reads_the_first_step_in_block_order() -> None:
    job = _job(2.0, {99: [9.0, 9.0, 9.0], 49: [0.4, 0.2, 0.1]})
    assert first_profile(job) == (49, [0.4, 0.2, 0.1])
    assert first_profile(Job(name="y", path=None, overrides=[], status="finished")) is None


def test_profile_table_is_the_seed_mean_at_the_best_lr() -> None:
    seeds = ["1", "2", "3"]
    post_best = [[0.01, 0.02, 0.12], [0.02, 0.02, 0.10], [0.012, 0.03, 0.11]]
    lo, hi = LRPoint(1e-3), LRPoint(3e-3)
    for s, p in zip(seeds, post_best, strict=True):
        lo.jobs[s] = _job(2.20, {49: p, 99: [5.0, 5.0, 5.0]})
        hi.jobs[s] = _job(2.40, {49: [1.0, 1.0, 1.0]})  # worse LR: its profile must not be shown
    arm = ArmSummary("post", [lo, hi], seeds, math.log(256))
    text = "## t\n\n" + profile_table(Cell({}, [arm], "post"))  # type: ignore[operator]
    (row,) = parse_table(text, "## t")
    means = [sum(col) / 3 for col in zip(*post_best, strict=True)]
    assert row["LR"] == "0.001" and row["step"] == "49" and row["seeds"] == "3"
    assert [float(row[f"block {b}"]) for b in range(3)] == pytest.approx(means, rel=2e-3)
    assert float(row["last / first"]) == pytest.approx(means[2] / means[0], rel=2e-3)


def test_arms_of_different_depth_keep_the_columns_aligned() -> None:
    """arm = n_layer: a 2-block arm's row leaves block 2 empty; last/first stays its own."""
    seeds = ["1", "2", "3"]
    shallow, deep = LRPoint(1e-3), LRPoint(1e-3)
    for s in seeds:
        shallow.jobs[s] = _job(2.2, {49: [0.4, 0.1]})
        deep.jobs[s] = _job(2.1, {49: [0.3, 0.2, 0.6]})
    arms = [ArmSummary("2", [shallow], seeds, math.log(256)), ArmSummary("8", [deep], seeds, math.log(256))]
    rows = {r["arm"]: r for r in parse_table("## t\n\n" + profile_table(Cell({}, arms, "2")), "## t")}  # type: ignore[operator]
    assert rows["`2`"]["block 2"] == "—" and float(rows["`2`"]["last / first"]) == pytest.approx(0.25)
    assert float(rows["`8`"]["block 2"]) == pytest.approx(0.6) and float(rows["`8`"]["last / first"]) == 2.0
