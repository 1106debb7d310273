"""MixtralForCausalLM: which gptlab MoE configs it reproduces, its tensor names, and its config.json.

Mixtral (Jiang et al. 2024, arXiv:2401.04088) routes with a softmax over the top-k router logits,
which equals the softmax over all experts renormalised over the k chosen: gptlab's norm_topk=true
(transformers 5 computes it that second way). No QK-norm; w1, w3, w2 are gate, up, down.
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
KIND = "mixtral"
ARCHITECTURE = "MixtralForCausalLM"
# The fields this target fixes beyond every MoE target's (moe_targets.COMMON): (value, why).
REQUIRED: dict[str, tuple[Any, str]] = {
    "qk_norm": (False, "it does not normalise queries and keys"),
    "moe.norm_topk": (True, "its gate is a softmax over the k chosen logits: weights summing to 1"),
    "moe.first_dense_layers": (0, "every layer is routed"),
}


def rules(cfg: GPTConfig) -> list[Rule]:
    """The tensor map of `cfg`: block_sparse_moe.gate (router), block_sparse_moe.experts.{e}.w1/w3/w2."""
    return moe_rules.rules(cfg, "block_sparse_moe", ("w1", "w3", "w2"))


def config_keys(cfg: GPTConfig) -> dict[str, Any]:
    """Mixtral's own config.json keys, each set where HF's default would be wrong."""
    assert cfg.moe is not None
    return moe_rules.config_keys(cfg) | {
        "intermediate_size": cfg.expert_hidden,
        "num_local_experts": cfg.moe.n_experts,
        "head_dim": cfg.head_dim,
        "sliding_window": None,
        "router_jitter_noise": 0.0,
    }


def config_fields(hf: Mapping[str, Any], where: Path) -> dict[str, Any]:
    """GPTConfig fields of a Mixtral config.json."""
    if hf.get("sliding_window") is not None:
        raise refuse(
            where, "sliding_window", hf["sliding_window"], "limits attention to a window", "null (global)"
        )
    jitter = hf.get("router_jitter_noise", 0.0)
    if jitter:
        raise refuse(
            where,
            "router_jitter_noise",
            jitter,
            "jitters the router's input in training, which gptlab does not",
            "0.0",
        )
    return moe_rules.config_fields(hf, where, "num_local_experts", "intermediate_size", True) | {
        "qk_norm": False
    }
