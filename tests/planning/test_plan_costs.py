"""The planner's time and MFU choice recomputed outside its code (issue 37, §6).

- Step time: model FLOPs per step (6·N + 12·L·T·d per token, PaLM) × the recompute factor, over
  devices × the GPU's dense bf16 peak from NVIDIA's H100 SXM datasheet (989.4 TFLOP/s, no sparsity)
  × MFU. A block checkpointed runs its forward twice: forward + backward is three forwards' worth
  (the backward about twice the forward), so the factor is 1 + (share of blocks checkpointed) / 3,
  the blocks counted here from the documented rule (full: all; selective: 0, k, 2k, ...).
- A budget of tokens takes ceil(tokens / tokens per step) steps: a last partial step still runs.
- The MFU row assumed is the one nearest in log size: the boundary between two rows of a GPU family
  is their geometric mean.
"""

from __future__ import annotations

import math

import pytest
import torch

from gptlab.config import OptimConfig
from gptlab.hardware import GPUS
from gptlab.model import GPT, GPTConfig
from gptlab.planning.mfu import MFU_TABLE, table_mfu
from gptlab.planning.plan import Plan, budget, plan
from gptlab.planning.step import Setup

H100_SXM_BF16 = 989.4e12  # dense FLOP/s, NVIDIA H100 datasheet
# 3 blocks: selective every 2 and every 3 checkpoint 2 and 1 of them (none 0, full 3)
SHAPE = {"n_layer": 3, "n_head": 4, "n_embd": 48, "block_size": 32, "vocab_size": 96}
ONE_BLOCK = {**SHAPE, "n_layer": 1}  # where only the tokens per step matter: the cheapest plan


@pytest.fixture(scope="module")
def plan_b4() -> Plan:
    """One plan of micro-batch 4, read by every budget of the test below (a plan takes ~0.3 s a block)."""
    return plan(Setup(GPTConfig.from_dict(ONE_BLOCK), OptimConfig(), 4), GPUS["H100 SXM"], mfu=0.4)


@pytest.mark.parametrize(("mode", "every"), [("none", 2), ("full", 2), ("selective", 2), ("selective", 3)])
def test_step_time_counts_the_recomputed_forward_as_a_third(mode: str, every: int) -> None:
    cfg = GPTConfig.from_dict(
        {**SHAPE, "activation_checkpointing": mode, "activation_checkpointing_every": every}
    )
    setup = Setup(cfg, OptimConfig(), 2, accumulate=3)
    p = plan(setup, GPUS["H100 SXM"], mfu=0.4)
    L = SHAPE["n_layer"]
    blocks = {"none": 0, "full": L, "selective": len(range(0, L, every))}[mode]
    factor = 1 + blocks / L / 3
    model = GPT(cfg)
    per_token = 6 * model.num_params(exclude_embedding=True) + 12 * L * SHAPE["block_size"] * SHAPE["n_embd"]
    tokens = 2 * 3 * SHAPE["block_size"]
    assert p.speed is not None
    assert p.speed.recompute == pytest.approx(factor, rel=1e-12)
    assert p.speed.step_time == pytest.approx(per_token * tokens * factor / (H100_SXM_BF16 * 0.4), rel=1e-12)


@pytest.mark.parametrize("tokens", [1000.0, 1024.0, 1e6 + 1])
def test_a_budget_rounds_its_steps_up(tokens: float, plan_b4: Plan) -> None:
    p = plan_b4
    per_step = 4 * SHAPE["block_size"]  # 128 tokens
    b = budget(p, tokens)
    assert b is not None and p.speed is not None
    steps = -(-int(tokens) // per_step)  # integer ceiling
    assert b.steps == steps and b.steps * per_step >= tokens > (b.steps - 1) * per_step
    assert b.seconds == pytest.approx(steps * p.speed.step_time, rel=1e-12)


@pytest.mark.parametrize("family, gpu", [("H100", "H100 SXM"), ("A100", "A100 80GB")])
def test_the_mfu_row_is_the_nearest_in_log_size(family: str, gpu: str) -> None:
    rows = sorted((r for r in MFU_TABLE if r.family == family), key=lambda r: r.params)
    for lower, upper in zip(rows, rows[1:], strict=False):
        midpoint = math.sqrt(lower.params * upper.params)
        assert table_mfu(gpu, int(midpoint * 0.98)) == lower
        assert table_mfu(gpu, int(midpoint * 1.02)) == upper
    assert table_mfu(gpu, 10) == rows[0] and table_mfu(gpu, 10**12) == rows[-1]
    assert table_mfu("L40S", 10**9) is None


def test_a_budget_counts_every_micro_batch_of_every_device() -> None:
    """Under accumulation and many devices a step takes micro-batch × accumulate × devices × T
    tokens (2 × 3 × 4 × 32 = 768 here), not one micro-batch's 64."""
    setup = Setup(GPTConfig.from_dict(ONE_BLOCK), OptimConfig(), 2, accumulate=3, world_size=4)
    p = plan(setup, GPUS["H100 SXM"], mfu=0.4)
    b = budget(p, 1e6)
    assert b is not None
    assert b.steps == math.ceil(1e6 / (2 * 3 * 4 * SHAPE["block_size"])) == 1303


H100_SXM_FP32, H100_SXM_TF32 = 66.9e12, 494.7e12  # dense FLOP/s, NVIDIA H100 datasheet


@pytest.mark.parametrize(("matmul", "peak"), [("highest", H100_SXM_FP32), ("high", H100_SXM_TF32)])
def test_an_fp32_run_is_timed_at_the_fp32_or_tf32_peak(matmul: str, peak: float) -> None:
    """precision=32-true runs its matmuls in fp32 (or TF32 when torch's float32 matmul precision
    allows it), at a peak 15× (or 2×) below bf16's: the step time is FLOPs over that peak × MFU."""
    cfg = GPTConfig.from_dict(SHAPE)
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(matmul)
    try:
        p = plan(Setup(cfg, OptimConfig(), 2, precision="32-true"), GPUS["H100 SXM"], mfu=0.4)
    finally:
        torch.set_float32_matmul_precision(before)
    model = GPT(cfg)
    L, T, d = SHAPE["n_layer"], SHAPE["block_size"], SHAPE["n_embd"]
    per_token = 6 * model.num_params(exclude_embedding=True) + 12 * L * T * d
    assert p.speed is not None
    assert p.speed.step_time == pytest.approx(per_token * 2 * T / (peak * 0.4), rel=1e-12)
