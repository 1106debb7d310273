"""LlamaForCausalLM: which gptlab configs it reproduces, its tensor names, and its config.json.

Both sides keep nn.Linear's (out, in) layout, so the tensor map is a pure rename.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gptlab.export.hf_config import decoder_keys, refuse, require, rope_attention_fields
from gptlab.export.rules import Rule
from gptlab.model.config import GPTConfig

KIND = "llama"
ARCHITECTURE = "LlamaForCausalLM"
# The fields this target fixes: field -> (the only accepted value, why the target needs it).
REQUIRED: dict[str, tuple[Any, str]] = {
    "norm": ("rmsnorm", "it normalises with RMSNorm"),
    "ffn": ("swiglu", "its MLP is the SiLU-gated one"),
    "pos_emb": ("rope", "it encodes positions with rotary embeddings"),
}
# k_proj/v_proj may have fewer heads than q_proj (num_key_value_heads: grouped-query attention)
GROUPED_KV = True
BASE_PREFIX = "model."
IGNORED = re.compile(r"rotary_emb\.inv_freq$")  # a buffer some checkpoints carry; gptlab recomputes it
EOS_OPENS_DOCUMENTS = False  # Llama has its own BOS token
# gptlab's linear layers → their names in a Llama-style decoder layer (Gemma 2 spells them alike)
LINEARS = (
    ("attn.q_proj", "self_attn.q_proj"),
    ("attn.k_proj", "self_attn.k_proj"),
    ("attn.v_proj", "self_attn.v_proj"),
    ("attn.out_proj", "self_attn.o_proj"),
    ("ffn.gate_proj", "mlp.gate_proj"),
    ("ffn.up_proj", "mlp.up_proj"),
    ("ffn.down_proj", "mlp.down_proj"),
)


def rules(cfg: GPTConfig) -> list[Rule]:
    """The tensor map of `cfg`; a tied lm_head is left out, as HF stores it once."""
    params = ("weight", "bias") if cfg.bias else ("weight",)
    out = [Rule("model.embed_tokens.weight", ("tok_emb.weight",))]
    for i in range(cfg.n_layer):
        ours, hf = f"blocks.{i}.", f"model.layers.{i}."
        out.append(Rule(hf + "input_layernorm.weight", (ours + "attn_norm.weight",)))
        out.append(Rule(hf + "post_attention_layernorm.weight", (ours + "ffn_norm.weight",)))
        for our_name, hf_name in LINEARS:
            for p in params:
                out.append(Rule(f"{hf}{hf_name}.{p}", (f"{ours}{our_name}.{p}",)))
    out.append(Rule("model.norm.weight", ("final_norm.weight",)))
    if not cfg.tie_embeddings:
        out.append(Rule("lm_head.weight", ("lm_head.weight",)))
    return out


def config_keys(cfg: GPTConfig) -> dict[str, Any]:
    """Llama's own config.json keys, each set where HF's default would be wrong."""
    return {
        **decoder_keys(cfg),  # Llama has no residual or embedding dropout: eval-mode outputs are unaffected
        "intermediate_size": cfg.hidden_dim,
        "head_dim": cfg.head_dim,
        "hidden_act": "silu",
        "rope_scaling": None,
        "attention_bias": cfg.bias,
        "mlp_bias": cfg.bias,
        "pretraining_tp": 1,
    }


def config_fields(hf: Mapping[str, Any], where: Path) -> dict[str, Any]:
    """GPTConfig fields of a config.json (transformers 4 or 5 spelling); ffn_hidden is the width."""
    attention = rope_attention_fields(hf, where)
    act = hf.get("hidden_act", "silu")
    if act not in ("silu", "swish"):
        raise refuse(where, "hidden_act", act, "is not SwiGLU's SiLU", "'silu'")
    attention_bias = bool(hf.get("attention_bias", False))
    mlp_bias = bool(hf.get("mlp_bias", False))
    if attention_bias != mlp_bias:
        raise refuse(
            where,
            "mlp_bias",
            mlp_bias,
            f"differs from attention_bias={attention_bias}; gptlab's one bias flag covers both",
            f"{attention_bias} (equal to attention_bias)",
        )
    return {
        "vocab_size": require(hf, "vocab_size", where),
        "block_size": hf.get("max_position_embeddings", 2048),
        "n_layer": require(hf, "num_hidden_layers", where),
        **attention,
        "norm": "rmsnorm",
        "norm_eps": hf.get("rms_norm_eps", 1e-6),
        "ffn": "swiglu",
        "ffn_hidden": require(hf, "intermediate_size", where),
        "tie_embeddings": bool(hf.get("tie_word_embeddings", False)),
        "pos_emb": "rope",
        "bias": attention_bias,
        "dropout": hf.get("attention_dropout", 0.0),
        "init_std": hf.get("initializer_range", 0.02),
    }
