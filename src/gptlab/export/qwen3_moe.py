"""Qwen3MoeForCausalLM: which gptlab MoE configs it reproduces, its tensor names, and its config.json.

Qwen3-MoE (Qwen Team 2025, arXiv:2505.09388) routes with softmax then top-k, renormalised with
norm_topk_prob; it RMS-normalises each head's q and k (gptlab's qk_norm_scope=head); its dense layers
(mlp_only_layers, and those decoder_sparse_step skips) are Llama MLPs of intermediate_size, which
gptlab can hold as a leading run: moe.first_dense_layers.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gptlab.export import moe_rules
from gptlab.export.hf_config import refuse
from gptlab.export.moe_rules import BASE_PREFIX, EOS_OPENS_DOCUMENTS, GROUPED_KV, IGNORED
from gptlab.export.rules import Rule
from gptlab.model.config import GPTConfig

__all__ = ["BASE_PREFIX", "EOS_OPENS_DOCUMENTS", "GROUPED_KV", "IGNORED"]
KIND = "qwen3_moe"
ARCHITECTURE = "Qwen3MoeForCausalLM"
# The fields this target fixes beyond every MoE target's (moe_targets.COMMON): (value, why).
REQUIRED: dict[str, tuple[Any, str]] = {
    "qk_norm": (True, "it RMS-normalises queries and keys"),
    "qk_norm_scope": ("head", "its q_norm and k_norm span one head"),
}


def rules(cfg: GPTConfig) -> list[Rule]:
    """The tensor map of `cfg`: mlp.gate (router), mlp.experts.{e}.gate_proj/up_proj/down_proj, and
    mlp.gate_proj/up_proj/down_proj in the dense layers."""
    return moe_rules.rules(cfg, "mlp", ("gate_proj", "up_proj", "down_proj"))


def config_keys(cfg: GPTConfig) -> dict[str, Any]:
    """Qwen3-MoE's own config.json keys, each set where HF's default would be wrong."""
    assert cfg.moe is not None
    return moe_rules.config_keys(cfg) | {
        "intermediate_size": cfg.hidden_dim,  # the dense layers' width (read only where there are some)
        "moe_intermediate_size": cfg.expert_hidden,
        "num_experts": cfg.moe.n_experts,
        "norm_topk_prob": cfg.moe.norm_topk,
        "decoder_sparse_step": 1,
        "mlp_only_layers": list(range(cfg.moe.first_dense_layers)),
        "head_dim": cfg.head_dim,
        "use_sliding_window": False,
        "sliding_window": None,
        "attention_bias": False,
    }


def config_fields(hf: Mapping[str, Any], where: Path) -> dict[str, Any]:
    """GPTConfig fields of a Qwen3-MoE config.json; its dense layers must lead the stack."""
    if hf.get("use_sliding_window", False):
        raise refuse(where, "use_sliding_window", True, "limits attention to a window", "false")
    fields = moe_rules.config_fields(
        hf, where, "num_experts", "moe_intermediate_size", bool(hf.get("norm_topk_prob", False))
    )
    n_layer, step = fields["n_layer"], hf.get("decoder_sparse_step", 1)
    only = hf.get("mlp_only_layers") or []
    if isinstance(step, bool) or not isinstance(step, int) or step < 1 or not isinstance(only, list):
        raise refuse(
            where,
            "decoder_sparse_step",
            step,
            "with mlp_only_layers is not readable",
            "an integer >= 1 and a list",
        )
    dense = [i for i in range(n_layer) if i in only or (i + 1) % step != 0]
    if dense != list(range(len(dense))) or len(dense) == n_layer:
        raise refuse(
            where,
            "mlp_only_layers",
            only,
            f"with decoder_sparse_step={step} makes layers {dense} dense, which is not a leading run "
            "followed by routed layers (gptlab's moe.first_dense_layers)",
            "mlp_only_layers=[0, ..., n-1] with n < num_hidden_layers and decoder_sparse_step=1",
        )
    fields["moe"]["first_dense_layers"] = len(dense)
    width = hf.get("intermediate_size") if dense else None
    if dense and width is None:
        raise ValueError(f"{where}: 'intermediate_size' is missing, and the dense layers {dense} need it")
    return fields | {"qk_norm": True, "qk_norm_scope": "head", "ffn_hidden": width}
