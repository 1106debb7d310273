"""What the three MoE targets (OLMoE, Mixtral, Qwen3-MoE) share: the tensor map of a Llama-style
block around a routed FFN, the config.json keys of the router, and reading them back.

HF stores each expert as three (out, in) Linear weights; gptlab stacks them as (E, in, out) (x @ W[e]),
so each HF expert tensor is one transposed slice of a stack (rule op `expert_t`). transformers 5 keeps
its experts fused in memory (gate_up_proj) but writes and reads this per-expert layout, which is also
what the published checkpoints hold.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from gptlab.export.hf_config import decoder_keys, refuse, require, rope_attention_fields
from gptlab.export.rules import Rule
from gptlab.model.config import GPTConfig

BASE_PREFIX = "model."
IGNORED = re.compile(r"rotary_emb\.inv_freq$")  # a buffer some checkpoints carry; gptlab recomputes it
EOS_OPENS_DOCUMENTS = False  # each has its own BOS/EOS convention, none gptlab's
GROUPED_KV = True  # num_key_value_heads
_ATTENTION = (
    ("attn.q_proj", "self_attn.q_proj"),
    ("attn.k_proj", "self_attn.k_proj"),
    ("attn.v_proj", "self_attn.v_proj"),
    ("attn.out_proj", "self_attn.o_proj"),
)
_DENSE = (("ffn.gate_proj", "gate_proj"), ("ffn.up_proj", "up_proj"), ("ffn.down_proj", "down_proj"))
_BIAS = re.compile(r"^blocks\.\d+\.ffn\.expert_bias$")


def rules(cfg: GPTConfig, moe: str, expert_names: tuple[str, str, str]) -> list[Rule]:
    """The tensor map of `cfg`: Llama's names around `moe` (the routed FFN's module name: mlp,
    block_sparse_moe), whose experts' gate, up and down weights HF calls `expert_names`."""
    assert cfg.moe is not None
    out = [Rule("model.embed_tokens.weight", ("tok_emb.weight",))]
    for i in range(cfg.n_layer):
        ours, hf = f"blocks.{i}.", f"model.layers.{i}."
        out.append(Rule(hf + "input_layernorm.weight", (ours + "attn_norm.weight",)))
        out.append(Rule(hf + "post_attention_layernorm.weight", (ours + "ffn_norm.weight",)))
        out += [Rule(f"{hf}{theirs}.weight", (f"{ours}{mine}.weight",)) for mine, theirs in _ATTENTION]
        if cfg.qk_norm:
            out += [
                Rule(f"{hf}self_attn.{n}.weight", (f"{ours}attn.{n}.weight",)) for n in ("q_norm", "k_norm")
            ]
        if not cfg.is_moe(i):  # Qwen3-MoE's mlp_only_layers: a dense Qwen3MoeMLP, Llama's names
            out += [Rule(f"{hf}mlp.{theirs}.weight", (f"{ours}{mine}.weight",)) for mine, theirs in _DENSE]
            continue
        out.append(Rule(f"{hf}{moe}.gate.weight", (f"{ours}ffn.router.weight",)))
        for e in range(cfg.moe.n_experts):
            for mine, theirs in zip(("gate_proj", "up_proj", "down_proj"), expert_names, strict=True):
                out.append(
                    Rule(
                        f"{hf}{moe}.experts.{e}.{theirs}.weight",
                        (f"{ours}ffn.experts.{mine}",),
                        "expert_t",
                        e,
                    )
                )
    out.append(Rule("model.norm.weight", ("final_norm.weight",)))
    if not cfg.tie_embeddings:
        out.append(Rule("lm_head.weight", ("lm_head.weight",)))
    return out


def zero_bias(ours: Mapping[str, torch.Tensor]) -> set[str]:
    """The MoE layers' balancing-bias buffers, which no target holds: dropped from an export when zero
    (balance aux_loss or none never moves them), else refused (they change which experts are chosen)."""
    names = {n for n in ours if _BIAS.match(n)}
    moved = sorted(n for n in names if bool(ours[n].detach().ne(0).any()))
    if moved:
        raise ValueError(
            f"model tensor {moved[0]} is nonzero: the bias changes which experts a token is routed to, "
            "and OLMoE, Mixtral and Qwen3-MoE route on the router's scores alone; accepted: a model "
            "whose expert_bias is zero (model.moe.balance aux_loss or none)"
        )
    return names


def routing_biases(expected: Mapping[str, tuple[int, ...]]) -> dict[str, torch.Tensor]:
    """Zero balancing biases for every MoE layer GPT(cfg) has (`expected`: its names and shapes)."""
    return {n: torch.zeros(shape) for n, shape in expected.items() if _BIAS.match(n)}


def config_keys(cfg: GPTConfig) -> dict[str, Any]:
    """The config.json keys the three targets spell alike. router_aux_loss_coef is carried (0 when
    balance=none); it enters transformers' loss only with output_router_logits, left false."""
    assert cfg.moe is not None
    return {
        **decoder_keys(cfg),
        "hidden_act": "silu",
        "rope_scaling": None,
        "num_experts_per_tok": cfg.moe.top_k,
        "router_aux_loss_coef": cfg.moe.aux_loss_coef if cfg.moe.balance == "aux_loss" else 0.0,
        "output_router_logits": False,
    }


def config_fields(
    hf: Mapping[str, Any], where: Path, n_experts_key: str, expert_width_key: str, norm_topk: bool
) -> dict[str, Any]:
    """GPTConfig fields of a MoE config.json: the experts' count under `n_experts_key` (either
    spelling is read), their width under `expert_width_key`, `norm_topk` the gate renormalisation.
    Training-only terms HF lacks (z-loss) read as off; router_aux_loss_coef > 0 reads as balance=aux_loss."""
    act = hf.get("hidden_act", "silu")
    if act not in ("silu", "swish"):
        raise refuse(where, "hidden_act", act, "is not the experts' SwiGLU SiLU", "'silu'")
    if hf.get("attention_bias", False):
        raise refuse(where, "attention_bias", True, "adds biases gptlab's MoE models do not carry", "false")
    n_experts = hf.get(n_experts_key)
    if n_experts is None:  # transformers 5 writes num_local_experts for Qwen3-MoE, 4 num_experts
        n_experts = hf.get("num_experts" if n_experts_key == "num_local_experts" else "num_local_experts")
    if n_experts is None:
        raise ValueError(f"{where}: {n_experts_key!r} is missing, and a {hf['model_type']} config needs it")
    coef = hf.get("router_aux_loss_coef", 0.0)
    if isinstance(coef, bool) or not isinstance(coef, int | float) or coef < 0:
        raise refuse(where, "router_aux_loss_coef", coef, "is not a coefficient", "a number >= 0")
    moe = {
        "n_experts": n_experts,
        "top_k": require(hf, "num_experts_per_tok", where),
        "expert_ffn": "swiglu",
        "expert_hidden": require(hf, expert_width_key, where),
        "router": "softmax",
        "norm_topk": norm_topk,
        "balance": "aux_loss" if coef > 0 else "none",
        "router_z_loss": 0.0,
    } | ({"aux_loss_coef": float(coef)} if coef > 0 else {})
    return {
        "vocab_size": require(hf, "vocab_size", where),
        "block_size": hf.get("max_position_embeddings", 4096),
        "n_layer": require(hf, "num_hidden_layers", where),
        **rope_attention_fields(hf, where, any_head_dim=True),
        "norm": "rmsnorm",
        "norm_eps": hf.get("rms_norm_eps", 1e-6),
        "ffn": "moe",
        "ffn_hidden": None,
        "moe": moe,
        "tie_embeddings": bool(hf.get("tie_word_embeddings", False)),
        "pos_emb": "rope",
        "bias": False,
        "dropout": hf.get("attention_dropout", 0.0),
        "init_std": hf.get("initializer_range", 0.02),
    }
