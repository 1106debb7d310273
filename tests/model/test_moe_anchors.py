"""Published MoE sizes from gptlab presets, counted on the meta device (no weights): within 0.5% of
the papers' total and active parameters."""

from __future__ import annotations

import pytest

from gptlab.analysis.params import config_from_overrides, main, param_report

# preset -> (total, active) as published: OLMoE (arXiv:2409.02060) 6.92B / 1.28B (1.3B in its
# abstract; 1.28B in the model card), Mixtral (arXiv:2401.04088) 46.7B / 12.9B (Mistral's card:
# 46.70B / 12.88B), Qwen3 (arXiv:2505.09388) 30.5B / 3.3B (model card: 30.53B / 3.35B)
ANCHORS = {
    "olmoe_1b_7b": (6.92e9, 1.28e9),
    "mixtral_8x7b": (46.70e9, 12.88e9),
    "qwen3_30b_a3b": (30.53e9, 3.35e9),
}


@pytest.mark.parametrize("preset", ANCHORS)
def test_total_and_active_match_the_published_counts(preset: str, capsys: pytest.CaptureFixture[str]) -> None:
    """As `python -m gptlab.analysis.params model=<preset>` prints them."""
    report = param_report(config_from_overrides([f"model={preset}"]))
    total, active = ANCHORS[preset]
    assert report.total == pytest.approx(total, rel=0.005)
    assert report.active == pytest.approx(active, rel=0.005)
    assert main([f"model={preset}"]) == 0
    rows = {line.split("  ")[0].strip(): line for line in capsys.readouterr().out.splitlines()}
    assert f"{report.total:,}" in rows["total"] and f"{report.active:,}" in rows["active"]


def test_active_is_top_k_of_the_experts() -> None:
    """A formula of its own: total − (n_experts − top_k)·per-expert, per MoE layer (not the dense ones)."""
    cfg = config_from_overrides(
        [
            "model/ffn=moe",
            "model.moe.n_experts=6",
            "model.moe.top_k=2",
            "model.moe.n_shared=1",
            "model.moe.first_dense_layers=1",
            "model.moe.expert_hidden=64",
        ]
    )
    report = param_report(cfg)
    per_expert = 3 * cfg.n_embd * 64
    assert report.total - report.active == (cfg.n_layer - 1) * (6 - 2) * per_expert
