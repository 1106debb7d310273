"""OlmoeForCausalLM: which gptlab MoE configs it reproduces, its tensor names, and its config.json.

OLMoE (Muennighoff et al. 2024, arXiv:2409.02060) is Llama's block with every FFN routed: softmax
over the experts, top-k, the k weights renormalised only with norm_topk_prob, and RMSNorm on the whole
q and k projections (transformers' OlmoeAttention: q_norm over hidden_size, k_norm over the key/value
heads' width), which is gptlab's qk_norm_scope=full.
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
KIND = "olmoe"
ARCHITECTURE = "OlmoeForCausalLM"
# The fields this target fixes beyond every MoE target's (moe_targets.COMMON): (value, why).
REQUIRED: dict[str, tuple[Any, str]] = {
    "qk_norm": (True, "it RMS-normalises queries and keys"),
    "qk_norm_scope": ("full", "its q_norm and k_norm span the whole projection, not one head"),
    "attn_head_dim": (None, "its q_norm spans hidden_size: heads split n_embd"),
    "moe.first_dense_layers": (0, "every layer is routed"),
}


def rules(cfg: GPTConfig) -> list[Rule]:
    """The tensor map of `cfg`: mlp.gate (router), mlp.experts.{e}.gate_proj/up_proj/down_proj."""
    return moe_rules.rules(cfg, "mlp", ("gate_proj", "up_proj", "down_proj"))


def config_keys(cfg: GPTConfig) -> dict[str, Any]:
    """OLMoE's own config.json keys, each set where HF's default would be wrong."""
    assert cfg.moe is not None
    return moe_rules.config_keys(cfg) | {
        "intermediate_size": cfg.expert_hidden,
        "num_experts": cfg.moe.n_experts,
        "norm_topk_prob": cfg.moe.norm_topk,
        "attention_bias": False,
        "clip_qkv": None,
    }


def config_fields(hf: Mapping[str, Any], where: Path) -> dict[str, Any]:
    """GPTConfig fields of an OLMoE config.json."""
    if hf.get("clip_qkv") is not None:
        raise refuse(where, "clip_qkv", hf["clip_qkv"], "clamps q, k and v, which gptlab never does", "null")
    fields = moe_rules.config_fields(
        hf, where, "num_experts", "intermediate_size", bool(hf.get("norm_topk_prob", False))
    )
    if (
        fields["attn_head_dim"] is not None
    ):  # OlmoeAttention's q_norm spans hidden_size whatever head_dim says
        raise refuse(
            where, "head_dim", hf["head_dim"], "splits the heads other than q_norm's hidden_size", "null"
        )
    return fields | {"qk_norm": True, "qk_norm_scope": "full"}
