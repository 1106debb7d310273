"""Gemma2ForCausalLM: which gptlab configs it reproduces, its tensor names, and its config.json.

Gemma 2 (Gemma Team 2024, arXiv:2408.00118) is gptlab's `norm_placement=sandwich` block: RMSNorm on
each branch's input and output (input_layernorm, post_attention_layernorm, pre_feedforward_layernorm,
post_feedforward_layernorm), with soft caps on the attention and output logits and local/global
layers (`layer_types`, any pattern). Three differences are absorbed by the tensor map (rules.to_hf):
its RMSNorm multiplies by (1 + w), so w − 1 is stored ("gain"); its embedding is multiplied by
sqrt(hidden_size), so tok_emb / sqrt(d) is stored ("embed"); and a tied head then reads that scaled
matrix, which the final norm's gain, the head's only input, undoes: sqrt(d)·w − 1 ("tied_gain").
Its logits are scaled by query_pre_attn_scalar^-0.5, written as head_dim.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gptlab.export.hf_config import decoder_keys, refuse, require, rope_attention_fields
from gptlab.export.llama import LINEARS
from gptlab.export.rules import Rule
from gptlab.model.config import GPTConfig

KIND = "gemma2"
ARCHITECTURE = "Gemma2ForCausalLM"
# The fields this target fixes: field -> (the only accepted value, why the target needs it).
REQUIRED: dict[str, tuple[Any, str]] = {
    "norm": ("rmsnorm", "it normalises with RMSNorm"),
    "norm_placement": ("sandwich", "it normalises each branch's input and output"),
    "pos_emb": ("rope", "it encodes positions with rotary embeddings"),
    "rope_fraction": (1.0, "its RoPE rotates every head dimension"),
    "nope_every": (None, "every layer applies RoPE"),
    "attn_gate": ("none", "no gate on the attention output"),
    "qk_norm": (False, "it does not normalise queries and keys"),
    "bias": (False, "its MLP and norms carry no bias"),
    "parametrization": ("sp", "no output multiplier or 1/d_head attention scale there"),
}
# gptlab's gated FFNs and the hidden_activation (transformers' ACT2FN name) of Gemma2MLP's gate
ACTIVATIONS = {"geglu_tanh": "gelu_pytorch_tanh", "geglu": "gelu", "swiglu": "silu", "reglu": "relu"}
GROUPED_KV = True
BASE_PREFIX = "model."
IGNORED = re.compile(r"rotary_emb\.inv_freq$")
EOS_OPENS_DOCUMENTS = False  # Gemma has its own BOS token
LOCAL, GLOBAL = "sliding_attention", "full_attention"
_NORMS = (
    ("attn_norm", "input_layernorm"),
    ("attn_out_norm", "post_attention_layernorm"),
    ("ffn_norm", "pre_feedforward_layernorm"),
    ("ffn_out_norm", "post_feedforward_layernorm"),
)


def check(cfg: GPTConfig) -> str:
    """KIND when Gemma2ForCausalLM reproduces `cfg` (a dense sandwich-norm GPT), else one line."""
    misses = [
        (name, getattr(cfg, name), repr(want), why)
        for name, (want, why) in REQUIRED.items()
        if getattr(cfg, name) != want
    ]
    if cfg.ffn not in ACTIVATIONS:
        accepted = " or ".join(map(repr, ACTIVATIONS))
        misses.append(("ffn", cfg.ffn, accepted, "its MLP is gated: act(gate_proj(x))·up_proj(x)"))
    if misses:
        raise ValueError(
            "; ".join(
                f"model.{name}={got!r} cannot be expressed by {ARCHITECTURE} ({why}); accepted: {want}"
                for name, got, want, why in misses
            )
        )
    return KIND


def rules(cfg: GPTConfig) -> list[Rule]:
    """The tensor map of `cfg`; a tied lm_head is left out, as HF stores it once."""
    out = [Rule("model.embed_tokens.weight", ("tok_emb.weight",), "embed")]
    for i in range(cfg.n_layer):
        ours, hf = f"blocks.{i}.", f"model.layers.{i}."
        for our_name, hf_name in _NORMS:
            out.append(Rule(f"{hf}{hf_name}.weight", (f"{ours}{our_name}.weight",), "gain"))
        for our_name, hf_name in LINEARS:
            out.append(Rule(f"{hf}{hf_name}.weight", (f"{ours}{our_name}.weight",)))
    out.append(
        Rule("model.norm.weight", ("final_norm.weight",), "tied_gain" if cfg.tie_embeddings else "gain")
    )
    if not cfg.tie_embeddings:
        out.append(Rule("lm_head.weight", ("lm_head.weight",)))
    return out


def layer_types(cfg: GPTConfig) -> list[str]:
    """Gemma 2's per-layer attention kinds: sliding where gptlab's layer has a window."""
    return [LOCAL if cfg.window_at(i) is not None else GLOBAL for i in range(cfg.n_layer)]


def config_keys(cfg: GPTConfig) -> dict[str, Any]:
    """Gemma 2's own config.json keys, each set where HF's default would be wrong."""
    return {
        **decoder_keys(cfg),
        "intermediate_size": cfg.hidden_dim,
        "head_dim": cfg.head_dim,
        "hidden_activation": ACTIVATIONS[cfg.ffn],
        "attention_bias": False,
        "query_pre_attn_scalar": cfg.head_dim,  # logits scaled by head_dim^-0.5, as gptlab's SDPA
        # read by no full_attention layer, but transformers 5.25 builds the sliding mask whatever
        # layer_types says and refuses a null one: a window of the whole context is global
        "sliding_window": cfg.window or cfg.block_size,
        "layer_types": layer_types(cfg),
        "attn_logit_softcapping": cfg.attn_softcap,
        "final_logit_softcapping": cfg.logit_softcap,
        "use_bidirectional_attention": False,
    }


def _pattern(kinds: list[str]) -> str | None:
    """The shortest S/L pattern p with p[i % len(p)] giving layer i's kind; None when all local."""
    letters = "".join("S" if k == LOCAL else "L" for k in kinds)
    if set(letters) == {"S"}:
        return None
    n = next(p for p in range(1, len(letters) + 1) if all(c == letters[i % p] for i, c in enumerate(letters)))
    return letters[:n]


def config_fields(hf: Mapping[str, Any], where: Path) -> dict[str, Any]:
    """GPTConfig fields of a Gemma 2 config.json (transformers' defaults where a key is absent)."""
    attention = rope_attention_fields(hf, where, any_head_dim=True)
    head_dim = hf.get("head_dim") or attention["n_embd"] // attention["n_head"]
    scalar = hf.get("query_pre_attn_scalar", 256)
    if scalar != head_dim:
        raise refuse(
            where,
            "query_pre_attn_scalar",
            scalar,
            "scales the attention logits by its own -1/2 power; gptlab scales by head_dim^-0.5",
            f"{head_dim} (head_dim)",
        )
    act = hf.get("hidden_activation", "gelu_pytorch_tanh")
    ffn = {a: f for f, a in ACTIVATIONS.items()}.get(act)
    if ffn is None:
        raise refuse(
            where,
            "hidden_activation",
            act,
            "is no gated FFN of gptlab's",
            "'gelu_pytorch_tanh', 'gelu', 'silu' or 'relu'",
        )
    if hf.get("attention_bias", False):
        raise refuse(where, "attention_bias", True, "adds biases gptlab's bias-free target lacks", "false")
    if hf.get("use_bidirectional_attention"):
        raise refuse(where, "use_bidirectional_attention", True, "is not causal", "false or null")
    n_layer = require(hf, "num_hidden_layers", where)
    kinds = hf.get("layer_types") or [LOCAL if i % 2 == 0 else GLOBAL for i in range(n_layer)]
    if not isinstance(kinds, list) or len(kinds) != n_layer or set(kinds) - {LOCAL, GLOBAL}:
        raise refuse(
            where, "layer_types", kinds, "is not one kind per layer", f"{LOCAL!r} or {GLOBAL!r} each"
        )
    local = LOCAL in kinds
    return {
        "vocab_size": require(hf, "vocab_size", where),
        "block_size": hf.get("max_position_embeddings", 8192),
        "n_layer": n_layer,
        **attention,
        "norm": "rmsnorm",
        "norm_eps": hf.get("rms_norm_eps", 1e-6),
        "norm_placement": "sandwich",
        "ffn": ffn,
        "ffn_hidden": require(hf, "intermediate_size", where),
        "tie_embeddings": bool(hf.get("tie_word_embeddings", True)),
        "pos_emb": "rope",
        "bias": False,
        "dropout": hf.get("attention_dropout", 0.0),
        "init_std": hf.get("initializer_range", 0.02),
        "attn_softcap": hf.get("attn_logit_softcapping", 50.0),
        "logit_softcap": hf.get("final_logit_softcapping", 30.0),
        "window": hf.get("sliding_window", 4096) if local else None,
        "window_pattern": _pattern(kinds) if local else None,
    }
