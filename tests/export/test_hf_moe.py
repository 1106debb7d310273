"""Hugging Face interop of `model/ffn=moe` (issue 47 item 7): OLMoE, Mixtral and Qwen3-MoE, both ways.

The oracle is transformers itself: a gptlab MoE exported and loaded by AutoModelForCausalLM gives
gptlab's logits, and a tiny random OlmoeForCausalLM / MixtralForCausalLM / Qwen3MoeForCausalLM built
and saved by transformers, read by gptlab (gpt_from_hf, init_from), gives transformers' logits.
Float32, tight tolerance: both sides run the same maths on the same weights.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch
from transformers import (
    AutoModelForCausalLM,
    MixtralConfig,
    MixtralForCausalLM,
    OlmoeConfig,
    OlmoeForCausalLM,
    Qwen3MoeConfig,
    Qwen3MoeForCausalLM,
)

from gptlab.export import check_exportable, export_hf, gpt_from_hf, init_config, init_from_hf, load_hf_config
from gptlab.model import GPT, GPTConfig

VOCAB = 96
BASE: dict[str, Any] = dict(
    n_layer=2, n_embd=32, n_head=4, vocab_size=VOCAB, block_size=32, ffn="moe", tie_embeddings=False
)
MOE: dict[str, Any] = dict(n_experts=4, top_k=2, expert_hidden=24)
OLMOE: dict[str, Any] = dict(qk_norm=True, qk_norm_scope="full")
QWEN: dict[str, Any] = dict(qk_norm=True, qk_norm_scope="head")
# name -> (GPTConfig overrides, model.moe overrides, expected target)
VARIANTS: dict[str, tuple[dict[str, Any], dict[str, Any], str]] = {
    "olmoe": (OLMOE, {"norm_topk": False}, "olmoe"),  # OLMoE-1B-7B's gate: raw softmax scores
    "olmoe_gqa_renorm": (OLMOE | {"n_kv_head": 2}, {"norm_topk": True}, "olmoe"),
    "mixtral": ({"n_kv_head": 2}, {}, "mixtral"),
    "mixtral_tied_top1": ({"tie_embeddings": True}, {"top_k": 1, "balance": "none"}, "mixtral"),
    "qwen3_moe": (QWEN | {"n_kv_head": 2, "attn_head_dim": 16}, {"norm_topk": True}, "qwen3_moe"),
    "qwen3_moe_dense_first": (QWEN, {"norm_topk": False, "first_dense_layers": 1}, "qwen3_moe"),
}
ATOL = 1e-5  # float32, the same operations in another order


def make_moe(overrides: dict[str, Any], moe: dict[str, Any], seed: int = 0) -> GPT:
    """A tiny MoE GPT, every parameter (norm gains included) moved off its init, in eval mode."""
    torch.manual_seed(seed)
    model = GPT(GPTConfig(**BASE | overrides | {"moe": MOE | moe}))
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.2 * torch.randn_like(p))
    return model.eval()


def tokens(seed: int = 1) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, VOCAB, (3, 20), generator=g)


def hf_logits(path: Path, idx: torch.Tensor) -> tuple[str, torch.Tensor]:
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    with torch.no_grad():
        return type(model).__name__, model(idx).logits


@pytest.mark.parametrize("variant", VARIANTS)
def test_transformers_reproduces_exported_moe_logits(variant: str, tmp_path: Path) -> None:
    overrides, moe, kind = VARIANTS[variant]
    model = make_moe(overrides, moe)
    assert check_exportable(model.cfg) == kind
    export_hf(model, tmp_path)
    idx = tokens()
    name, logits = hf_logits(tmp_path, idx)
    assert name == {"olmoe": "OlmoeForCausalLM", "mixtral": "MixtralForCausalLM"}.get(
        kind, "Qwen3MoeForCausalLM"
    )
    with torch.no_grad():
        ours = model(idx)
    torch.testing.assert_close(logits, ours, rtol=0, atol=ATOL)
    # read back: the same config but the terms HF has no field for (z-loss), the same function
    back = gpt_from_hf(tmp_path)
    assert back.cfg == GPTConfig(**BASE | overrides | {"moe": MOE | moe | {"router_z_loss": 0.0}})
    with torch.no_grad():
        torch.testing.assert_close(back(idx), ours, rtol=0, atol=0)


def test_the_gate_renormalisation_is_what_transformers_reads(tmp_path: Path) -> None:
    """norm_topk decides the logits: the same weights under the other choice give other logits, so
    the tolerance above would catch norm_topk_prob written wrongly."""
    model = make_moe(OLMOE, {"norm_topk": False})
    export_hf(model, tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["norm_topk_prob"] is False
    flipped = GPT(GPTConfig(**BASE | OLMOE | {"moe": MOE | {"norm_topk": True}})).eval()
    flipped.load_state_dict(model.state_dict())
    idx = tokens()
    with torch.no_grad():
        assert (flipped(idx) - model(idx)).abs().max() > 100 * ATOL


def save_transformers_model(kind: str, path: Path, **extra: Any) -> torch.nn.Module:
    """A tiny random model of `kind` built and saved by transformers itself, weights perturbed."""
    common = dict(
        vocab_size=VOCAB,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        num_experts_per_tok=2,
        max_position_embeddings=64,
        rms_norm_eps=1e-5,
        pad_token_id=None,
        eos_token_id=None,
        bos_token_id=None,
    )
    torch.manual_seed(0)
    if kind == "olmoe":
        model = OlmoeForCausalLM(OlmoeConfig(**common | dict(num_experts=4, intermediate_size=24) | extra))
    elif kind == "mixtral":
        model = MixtralForCausalLM(
            MixtralConfig(**common | dict(num_local_experts=4, intermediate_size=24) | extra)
        )
    else:
        cfg = common | dict(num_experts=4, moe_intermediate_size=16, intermediate_size=40, head_dim=16)
        model = Qwen3MoeForCausalLM(Qwen3MoeConfig(**cfg | extra))
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.2 * torch.randn_like(p))
    model.save_pretrained(path)
    return model.eval()


TRANSFORMERS_MODELS: dict[str, tuple[str, dict[str, Any]]] = {
    "olmoe": ("olmoe", {"norm_topk_prob": False}),
    "olmoe_renorm": ("olmoe", {"norm_topk_prob": True}),
    "mixtral": ("mixtral", {}),
    "qwen3_moe": ("qwen3_moe", {"norm_topk_prob": True}),
    "qwen3_moe_mlp_only_0": ("qwen3_moe", {"norm_topk_prob": False, "mlp_only_layers": [0]}),
    "qwen3_moe_sparse_step_2": ("qwen3_moe", {"decoder_sparse_step": 2}),  # layer 0 dense, layer 1 routed
}


@pytest.mark.parametrize("name", TRANSFORMERS_MODELS)
def test_init_from_a_transformers_moe_gives_its_logits(name: str, tmp_path: Path) -> None:
    kind, extra = TRANSFORMERS_MODELS[name]
    hf = save_transformers_model(kind, tmp_path, **extra)
    idx = tokens()
    with torch.no_grad():
        want = hf(idx).logits
    ours = gpt_from_hf(tmp_path)
    cfg = ours.cfg
    assert cfg.ffn == "moe" and cfg.moe is not None and check_exportable(cfg) == kind
    assert cfg.moe.norm_topk == extra.get("norm_topk_prob", kind == "mixtral")
    assert cfg.moe.first_dense_layers == (1 if name.startswith("qwen3_moe_") else 0)
    with torch.no_grad():
        torch.testing.assert_close(ours(idx), want, rtol=0, atol=ATOL)
    # model.init_from: the architecture from config.json, the run's context; then the weights
    start = init_config(tmp_path, GPTConfig(block_size=16, ffn="moe"), vocab_size=VOCAB)
    # model/ffn=moe's default training terms (aux 0.01, z-loss 0.001), the file's architecture
    assert start.block_size == 16 and start.moe == replace(cfg.moe, router_z_loss=0.001, aux_loss_coef=0.01)
    model = GPT(start).eval()
    init_from_hf(model, tmp_path)
    with torch.no_grad():
        torch.testing.assert_close(model(idx[:, :16]), want[:, :16], rtol=0, atol=ATOL)


def test_init_from_keeps_the_runs_training_terms(tmp_path: Path) -> None:
    """model.moe's balancing and capacity train the checkpoint; its architecture stays the file's."""
    save_transformers_model("mixtral", tmp_path, router_aux_loss_coef=0.02)
    read = load_hf_config(tmp_path).moe
    assert read is not None and (read.balance, read.aux_loss_coef, read.router_z_loss) == (
        "aux_loss",
        0.02,
        0.0,
    )
    run = GPTConfig(
        ffn="moe",
        moe={"n_experts": 16, "top_k": 4, "balance": "bias", "router_z_loss": 0.003, "capacity_factor": 1.5},
    )
    moe = init_config(tmp_path, run, vocab_size=VOCAB).moe
    assert moe is not None and (moe.n_experts, moe.top_k, moe.norm_topk) == (4, 2, True)
    assert (moe.balance, moe.router_z_loss, moe.capacity_factor) == ("bias", 0.003, 1.5)
    assert init_config(tmp_path, GPTConfig(), vocab_size=VOCAB).moe == read  # no model/ffn=moe: the file's


def test_init_from_names_a_mismatched_moe(tmp_path: Path) -> None:
    save_transformers_model("olmoe", tmp_path)
    cfg = load_hf_config(tmp_path)
    other = GPTConfig(**cfg.to_dict() | {"qk_norm_scope": "head", "moe": cfg.to_dict()["moe"] | {"top_k": 1}})
    with pytest.raises(
        ValueError, match=r"model\.qk_norm_scope='head' \(checkpoint: 'full'\).*model\.moe\.top_k=1"
    ):
        init_from_hf(GPT(other), tmp_path)


@pytest.mark.parametrize(
    ("preset", "kind"),
    [("olmoe_1b_7b", "olmoe"), ("mixtral_8x7b", "mixtral"), ("qwen3_30b_a3b", "qwen3_moe")],
)
def test_each_published_moe_preset_exports_as_its_own_architecture(preset: str, kind: str) -> None:
    """The presets of docs/moe.md's counting table are the HF models they name (config only: no weights)."""
    from gptlab.analysis.params import config_from_overrides

    assert check_exportable(config_from_overrides([f"model={preset}"])) == kind
