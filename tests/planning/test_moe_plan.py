"""The planner under model/ffn=moe: every expert's weights and AdamW moments are in the plan, and the
fake step runs on both precisions (fp32 takes a same-shape stand-in for torch._grouped_mm there)."""

from __future__ import annotations

import pytest

from gptlab.planning.cli import main
from tests.planning.test_plan_cli import TINY

MOE = ["model/ffn=moe", "model.moe.n_experts=4", "model.moe.expert_hidden=64", "data.batch_size=2"]


@pytest.mark.parametrize("precision", ["32-true", "bf16-mixed"])
def test_moe_plan_counts_every_expert(capsys: pytest.CaptureFixture[str], precision: str) -> None:
    assert main([*TINY, *MOE, f"trainer.precision={precision}", "plan.gpu=H200"]) == 0
    out = capsys.readouterr().out
    assert "experts    4×swiglu of width 64, top-2" in out and "the same for any imbalance" in out
    ffn = next(line for line in out.splitlines() if line.strip().startswith("ffn "))
    # one MoE block (TINY: 1 layer, d = 48): 4 experts × 3·48·64 + the router 4·48 = 37,056
    assert ffn.split()[1] == "37.06k", ffn
