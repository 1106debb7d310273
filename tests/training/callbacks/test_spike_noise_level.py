"""The spike detector's noise level and warm-up against numbers made outside it (issue 37, §6).

The loss is fed straight to SpikeWatch (test_spike_skip_bound's `feed`). A flat loss plus white noise
of a known standard deviation s (numpy draws it, numpy's std measures it): the detector's σ must be
that s, since for independent noise a step-to-step difference has variance 2s², and σ is their RMS
over √2 (the module's docstring). Then one step 7s above the level is a spike at threshold 6, and one
5s above is not. (σ starts at 0 and reaches 95% of s after ~3000 steps of decay 0.999: the
warm-up covers that.) And the first step judged is step `warmup_steps` (0-based: that many steps folded in
before it), as `callbacks.spikes.warmup_steps` documents.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from gptlab.training.callbacks import spike_culprits as culprits
from gptlab.training.callbacks.spikes import SpikeWatch
from tests.training.callbacks.test_spike_skip_bound import feed

LEVEL, S, N = 3.0, 0.05, 4000


def noise(seed: int = 0) -> np.ndarray:
    return LEVEL + np.random.default_rng(seed).normal(0.0, S, N)


def test_sigma_is_the_noise_standard_deviation() -> None:
    losses = noise()
    watch = SpikeWatch(None, ema_decay=0.999, warmup_steps=3000)
    feed(watch, losses.tolist())
    assert watch.spikes == []  # nothing near 6s in 4000 normal draws
    measured = float(np.std(losses[-1500:]))  # the EMA's ~1000-step window
    assert math.sqrt(watch.var) == pytest.approx(measured, rel=0.08)
    assert watch.ema == pytest.approx(float(losses[-1500:].mean()), abs=S / 4)


@pytest.mark.parametrize(("jump", "spike"), [(7.0, True), (5.0, False)])
def test_a_jump_of_k_noise_sds_is_a_spike_only_above_the_threshold(jump: float, spike: bool) -> None:
    losses = noise(1)
    sd = float(np.std(losses))
    level = float(losses[-1000:].mean())
    watch = SpikeWatch(None, threshold=6.0, ema_decay=0.999, warmup_steps=3000)
    feed(watch, [*losses.tolist(), level + jump * sd])
    assert [r["step"] for r in watch.spikes] == ([N] if spike else [])
    if spike:
        assert watch.spikes[0]["z"] == pytest.approx(jump, rel=0.12)


@pytest.mark.parametrize("warmup", [5, 12])
def test_the_first_step_judged_is_step_warmup_steps(warmup: int) -> None:
    """Steps 0..warmup−1 are folded in unjudged; a jump of 100 noise SDs at step `warmup` is a spike
    (and the same jump one step earlier is not judged at all)."""
    quiet = [LEVEL + S * math.sin(1.9 * i) for i in range(warmup)]
    at = SpikeWatch(None, ema_decay=0.9, warmup_steps=warmup)
    feed(at, [*quiet, LEVEL + 100 * S])
    assert [r["step"] for r in at.spikes] == [warmup]
    early = SpikeWatch(None, ema_decay=0.9, warmup_steps=warmup)
    feed(early, [*quiet[:-1], LEVEL + 100 * S])
    assert early.spikes == []


def test_the_blocks_named_are_those_whose_gradient_norm_rose_most() -> None:
    """Per block the gradient norm at the spike over its last logged value before it, written out
    here: 2, 10, 1.5 and 4 times; the record names the top three, largest rise first."""
    from types import SimpleNamespace

    blocks = ["block_00", "block_01", "block_02", "block_03"]
    before = {f"grad_norm/{b}": v for b, v in zip(blocks, [1.0, 0.5, 2.0, 0.25], strict=True)}
    at = {f"grad_norm/{b}": v for b, v in zip(blocks, [2.0, 5.0, 3.0, 1.0], strict=True)}
    telemetry = SimpleNamespace(history=[(0, {}), (10, before), (24, at)], blocks=blocks)
    rise = {b: at[f"grad_norm/{b}"] / before[f"grad_norm/{b}"] for b in blocks}
    expected = sorted(blocks, key=lambda b: -rise[b])[:3]
    assert expected == ["block_01", "block_03", "block_00"]
    rows = culprits.blocks(telemetry, 24)
    assert [r["block"] for r in rows] == expected
    assert [r["grad_norm_ratio"] for r in rows] == pytest.approx([rise[b] for b in expected])


def test_the_routers_named_are_those_whose_balance_moved_most() -> None:
    """Under MoE, per layer max/mean load at the spike over its last logged value, written out here:
    1.1, 3.0 and 0.8 times; the record names them largest rise first, with the layer's own numbers."""
    from types import SimpleNamespace

    moe = ["block_01", "block_02", "block_03"]
    before = {f"moe/{b}/max_over_mean_load": v for b, v in zip(moe, [1.5, 1.2, 2.0], strict=True)}
    at = {f"moe/{b}/max_over_mean_load": v for b, v in zip(moe, [1.65, 3.6, 1.6], strict=True)}
    at |= {f"moe/{b}/router_entropy": 1.0 + i for i, b in enumerate(moe)} | {"grad_norm/block_00": 1.0}
    telemetry = SimpleNamespace(history=[(0, {}), (10, before), (24, at)], blocks=["block_00", *moe])
    rows = culprits.routers(telemetry, 24)
    assert [r["block"] for r in rows] == ["block_02", "block_01", "block_03"]
    assert [r["load_ratio"] for r in rows] == pytest.approx([3.6 / 1.2, 1.65 / 1.5, 1.6 / 2.0])
    assert rows[0]["router_entropy"] == 2.0 and rows[0]["max_over_mean_load"] == 3.6
    assert (
        culprits.routers(
            SimpleNamespace(history=[(24, {"grad_norm/block_00": 1.0})], blocks=["block_00"]), 24
        )
        == []
    )
