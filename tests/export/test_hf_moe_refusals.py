# ruff: noqa: E501  (the tables hold the exact one-line errors)
"""What OLMoE, Mixtral and Qwen3-MoE cannot hold is refused in one line naming the field and what is
accepted: on export (check_exportable, scripts/export.py with exit 2) and on reading a config.json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from gptlab.export import check_exportable, export_hf, load_hf_config
from gptlab.model import GPT, GPTConfig
from tests.export.test_hf import export_cli
from tests.export.test_hf_moe import BASE, MOE, OLMOE, QWEN, make_moe

ALL = "OlmoeForCausalLM, MixtralForCausalLM or Qwen3MoeForCausalLM"
# (GPTConfig overrides, model.moe overrides) -> the whole message
REFUSED: list[tuple[dict[str, Any], dict[str, Any], str]] = [
    (
        {},
        {"router": "sigmoid"},
        f"model.moe.router='sigmoid' cannot be expressed by {ALL} (their routers score with a softmax over the experts); accepted: 'softmax'",
    ),
    (
        {},
        {"n_shared": 1},
        f"model.moe.n_shared=1 cannot be expressed by {ALL} (they have no always-on expert (Qwen2-MoE's shared expert is not a target)); accepted: 0",
    ),
    (
        {},
        {"balance": "bias"},
        f"model.moe.balance='bias' cannot be expressed by {ALL} (the loss-free bias changes which experts are chosen and no target's config holds it); accepted: 'aux_loss' or 'none'",
    ),
    (
        {},
        {"capacity_factor": 1.25},
        f"model.moe.capacity_factor=1.25 cannot be expressed by {ALL} (they are dropless: every token reaches its k experts); accepted: None",
    ),
    (
        {},
        {"expert_ffn": "gelu"},
        f"model.moe.expert_ffn='gelu' cannot be expressed by {ALL} (their experts are SiLU-gated); accepted: 'swiglu'",
    ),
    (
        {"bias": True},
        {},
        f"model.bias=True cannot be expressed by {ALL} (their experts, routers and norms carry no bias); accepted: False",
    ),
    (
        {"norm_placement": "sandwich"},
        {},
        f"model.norm_placement='sandwich' cannot be expressed by {ALL} (they are pre-norm); accepted: 'pre'",
    ),
    (  # Mixtral-shaped but for a dense first layer: the nearest target is blamed, the others named
        {},
        {"first_dense_layers": 1},
        "model.moe.first_dense_layers=1 cannot be expressed by MixtralForCausalLM (every layer is routed); accepted: 0 "
        "(the other targets: OlmoeForCausalLM would need qk_norm=True, qk_norm_scope='full', moe.first_dense_layers=0; "
        "Qwen3MoeForCausalLM would need qk_norm=True)",
    ),
    (  # no QK-norm and raw top-k scores: Mixtral renormalises, Qwen3-MoE and OLMoE have QK-norm
        {},
        {"norm_topk": False},
        "model.moe.norm_topk=False cannot be expressed by MixtralForCausalLM (its gate is a softmax over the k chosen "
        "logits: weights summing to 1); accepted: True (the other targets: OlmoeForCausalLM would need qk_norm=True, "
        "qk_norm_scope='full'; Qwen3MoeForCausalLM would need qk_norm=True)",
    ),
    (
        OLMOE | {"attn_head_dim": 16},
        {},
        "model.attn_head_dim=16 cannot be expressed by OlmoeForCausalLM (its q_norm spans hidden_size: heads split n_embd); "
        "accepted: None (the other targets: MixtralForCausalLM would need qk_norm=False; Qwen3MoeForCausalLM would need "
        "qk_norm_scope='head')",
    ),
]


@pytest.mark.parametrize(("overrides", "moe", "message"), REFUSED)
def test_what_no_moe_target_holds_is_refused_by_name(
    overrides: dict[str, Any], moe: dict[str, Any], message: str
) -> None:
    cfg = GPTConfig(**BASE | overrides | {"moe": MOE | moe})
    with pytest.raises(ValueError) as err:
        check_exportable(cfg)
    assert str(err.value) == message


def test_the_cli_refuses_an_unexportable_moe_in_one_line_with_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    model = GPT(GPTConfig(**BASE | {"moe": MOE | {"router": "sigmoid"}}))
    torch.save({"model_config": model.cfg.to_dict(), "state_dict": model.state_dict()}, tmp_path / "moe.pt")
    monkeypatch.chdir(tmp_path)
    assert export_cli().main(["ckpt_path=moe.pt", "out_dir=hf"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines == [f"export: error: {REFUSED[0][2]}"]
    assert not (tmp_path / "hf").exists()


def test_a_moved_routing_bias_is_refused(tmp_path: Path) -> None:
    """A bias left by balance=bias training under a config that no longer says so still routes."""
    model = make_moe({}, {})
    with torch.no_grad():
        model.blocks[1].ffn.expert_bias[2] = 0.5
    with pytest.raises(
        ValueError,
        match=r"^model tensor blocks\.1\.ffn\.expert_bias is nonzero: .*; accepted: a model whose expert_bias is zero",
    ):
        export_hf(model, tmp_path)
    assert not (tmp_path / "model.safetensors").exists()


# kind -> GPTConfig overrides that export as it; then the config.json edits refused on reading
SHAPES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "olmoe": (OLMOE, {}),
    "mixtral": ({}, {}),
    "qwen3_moe": (QWEN, {"first_dense_layers": 1}),
}
READ_REFUSED: list[tuple[str, dict[str, Any], str]] = [
    ("olmoe", {"clip_qkv": 8.0}, "clip_qkv=8.0 clamps q, k and v, which gptlab never does; accepted: null"),
    (
        "olmoe",
        {"head_dim": 16},
        "head_dim=16 splits the heads other than q_norm's hidden_size; accepted: null",
    ),
    ("olmoe", {"hidden_act": "gelu"}, "hidden_act='gelu' is not the experts' SwiGLU SiLU; accepted: 'silu'"),
    (
        "olmoe",
        {"attention_bias": True},
        "attention_bias=True adds biases gptlab's MoE models do not carry; accepted: false",
    ),
    (
        "mixtral",
        {"sliding_window": 16},
        "sliding_window=16 limits attention to a window; accepted: null (global)",
    ),
    (
        "mixtral",
        {"router_jitter_noise": 0.1},
        "router_jitter_noise=0.1 jitters the router's input in training, which gptlab does not; accepted: 0.0",
    ),
    ("mixtral", {"num_local_experts": None}, "'num_local_experts' is missing, and a mixtral config needs it"),
    (
        "mixtral",
        {"num_experts_per_tok": 5},
        "model.moe.top_k=5 exceeds model.moe.n_experts=4; accepted: an integer from 1 to n_experts",
    ),
    (
        "mixtral",
        {"rope_parameters": {"rope_type": "linear", "factor": 2.0}},
        "rope_parameters.rope_type='linear' scales RoPE; accepted: 'default'",
    ),
    (
        "qwen3_moe",
        {"use_sliding_window": True},
        "use_sliding_window=True limits attention to a window; accepted: false",
    ),
    (
        "qwen3_moe",
        {"mlp_only_layers": [1]},
        "mlp_only_layers=[1] with decoder_sparse_step=1 makes layers [1] dense, which is not a leading run followed by "
        "routed layers (gptlab's moe.first_dense_layers); accepted: mlp_only_layers=[0, ..., n-1] with n < "
        "num_hidden_layers and decoder_sparse_step=1",
    ),
    (
        "qwen3_moe",
        {"mlp_only_layers": [0, 1]},
        "makes layers [0, 1] dense, which is not a leading run followed by routed layers",
    ),
]


@pytest.mark.parametrize(("kind", "edits", "message"), READ_REFUSED)
def test_a_config_json_gptlab_cannot_run_is_refused_by_name(
    kind: str, edits: dict[str, Any], message: str, tmp_path: Path
) -> None:
    overrides, moe = SHAPES[kind]
    cfg = GPTConfig(**BASE | overrides | {"moe": MOE | moe})
    assert check_exportable(cfg) == kind
    export_hf(GPT(cfg), tmp_path)
    path = tmp_path / "config.json"
    hf = json.loads(path.read_text())
    hf.update(edits)
    path.write_text(json.dumps({k: v for k, v in hf.items() if v is not None or k not in edits}))
    with pytest.raises(ValueError) as err:
        load_hf_config(tmp_path)
    assert str(err.value).startswith(f"{path}: ") and message in str(err.value), str(err.value)
    assert "\n" not in str(err.value)


def test_qk_norm_scope_is_validated() -> None:
    with pytest.raises(
        ValueError, match=r"^model\.qk_norm_scope='all' is not accepted; choose one of head, full$"
    ):
        GPTConfig(qk_norm=True, qk_norm_scope="all")
