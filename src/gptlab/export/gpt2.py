"""GPT2LMHeadModel: which gptlab configs it reproduces, its tensor names, and its config.json.

GPT-2's Conv1D stores weights as (in, out), and q, k, v live fused in one c_attn tensor.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gptlab.export.hf_config import refuse, require
from gptlab.export.rules import Rule
from gptlab.model.config import GPTConfig

KIND = "gpt2"
ARCHITECTURE = "GPT2LMHeadModel"
# The fields this target fixes: field -> (the only accepted value, why the target needs it).
REQUIRED: dict[str, tuple[Any, str]] = {
    "norm": ("layernorm", "it normalises with LayerNorm"),
    "ffn": ("gelu_tanh", "its MLP is ungated with the tanh GELU, 'gelu_new'"),
    "pos_emb": ("learned", "it adds learned position embeddings"),
    "bias": (True, "every Conv1D and LayerNorm carries a bias"),
    "tie_embeddings": (True, "its lm_head is tied to wte"),
    "attn_head_dim": (None, "its heads split n_embd"),
}
# c_attn holds q, k and v at equal widths: one key/value head per query head
GROUPED_KV = False
BASE_PREFIX = "transformer."
IGNORED = re.compile(r"\.attn\.(bias|masked_bias)$")  # the causal mask some checkpoints carry
EOS_OPENS_DOCUMENTS = True  # GPT-2's convention: <|endoftext|> opens documents too


def rules(cfg: GPTConfig) -> list[Rule]:
    """The tensor map of `cfg` (tied lm_head: GPT-2 stores only wte)."""
    out = [
        Rule("transformer.wte.weight", ("tok_emb.weight",)),
        Rule("transformer.wpe.weight", ("pos_emb.weight",)),
    ]
    for i in range(cfg.n_layer):
        ours, hf = f"blocks.{i}.", f"transformer.h.{i}."
        qkv = tuple(f"{ours}attn.{n}_proj" for n in "qkv")
        out += [
            Rule(hf + "ln_1.weight", (ours + "attn_norm.weight",)),
            Rule(hf + "ln_1.bias", (ours + "attn_norm.bias",)),
            Rule(hf + "attn.c_attn.weight", tuple(n + ".weight" for n in qkv), "qkv_w"),
            Rule(hf + "attn.c_attn.bias", tuple(n + ".bias" for n in qkv), "qkv_b"),
            Rule(hf + "attn.c_proj.weight", (ours + "attn.out_proj.weight",), "t"),
            Rule(hf + "attn.c_proj.bias", (ours + "attn.out_proj.bias",)),
            Rule(hf + "ln_2.weight", (ours + "ffn_norm.weight",)),
            Rule(hf + "ln_2.bias", (ours + "ffn_norm.bias",)),
            Rule(hf + "mlp.c_fc.weight", (ours + "ffn.up_proj.weight",), "t"),
            Rule(hf + "mlp.c_fc.bias", (ours + "ffn.up_proj.bias",)),
            Rule(hf + "mlp.c_proj.weight", (ours + "ffn.down_proj.weight",), "t"),
            Rule(hf + "mlp.c_proj.bias", (ours + "ffn.down_proj.bias",)),
        ]
    out += [
        Rule("transformer.ln_f.weight", ("final_norm.weight",)),
        Rule("transformer.ln_f.bias", ("final_norm.bias",)),
    ]
    return out


def config_keys(cfg: GPTConfig) -> dict[str, Any]:
    """GPT-2's own config.json keys, each set where HF's default would be wrong."""
    return {
        "n_embd": cfg.n_embd,
        "n_layer": cfg.n_layer,
        "n_head": cfg.n_head,
        "n_positions": cfg.block_size,
        "n_ctx": cfg.block_size,
        "n_inner": None if cfg.hidden_dim == 4 * cfg.n_embd else cfg.hidden_dim,
        "activation_function": "gelu_new",
        "layer_norm_epsilon": cfg.norm_eps,
        "resid_pdrop": cfg.dropout,
        "embd_pdrop": cfg.dropout,
        "attn_pdrop": cfg.dropout,
        "scale_attn_weights": True,
        "scale_attn_by_inverse_layer_idx": False,
        "reorder_and_upcast_attn": False,
        "add_cross_attention": False,
    }


def config_fields(hf: Mapping[str, Any], where: Path) -> dict[str, Any]:
    """GPTConfig fields of a config.json; ffn_hidden is the FFN width (n_inner, else 4·d)."""
    act = hf.get("activation_function", "gelu_new")
    if act not in ("gelu_new", "gelu_pytorch_tanh"):
        raise refuse(
            where,
            "activation_function",
            act,
            "is not the tanh GELU",
            "'gelu_new', 'gelu_pytorch_tanh'",
        )
    if not hf.get("tie_word_embeddings", True):
        raise refuse(where, "tie_word_embeddings", False, "unties GPT-2's head", "True")
    if not hf.get("scale_attn_weights", True):
        raise refuse(where, "scale_attn_weights", False, "drops the 1/sqrt(d_head) scale", "True")
    if hf.get("scale_attn_by_inverse_layer_idx", False):
        raise refuse(where, "scale_attn_by_inverse_layer_idx", True, "rescales by depth", "False")
    if hf.get("add_cross_attention", False):
        raise refuse(where, "add_cross_attention", True, "adds an encoder path", "False")
    n_embd = require(hf, "n_embd", where)
    return {
        "vocab_size": require(hf, "vocab_size", where),
        "block_size": hf.get("n_positions") or hf.get("n_ctx") or 1024,
        "n_layer": require(hf, "n_layer", where),
        "n_head": require(hf, "n_head", where),
        "n_embd": n_embd,
        "norm": "layernorm",
        "norm_eps": hf.get("layer_norm_epsilon", 1e-5),
        "ffn": "gelu_tanh",
        "ffn_hidden": hf.get("n_inner") or 4 * n_embd,
        "tie_embeddings": True,
        "pos_emb": "learned",
        "bias": True,
        "dropout": hf.get("resid_pdrop", 0.1),
        "init_std": hf.get("initializer_range", 0.02),
    }
