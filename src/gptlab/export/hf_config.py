"""config.json: the keys every target writes, and the helpers the converters read it with."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from gptlab.model.config import GPTConfig


def dtype_name(dtype: torch.dtype) -> str:
    """'float32' for torch.float32: the spelling config.json uses."""
    return str(dtype).removeprefix("torch.")


def common_keys(
    cfg: GPTConfig, kind: str, architecture: str, dtype: torch.dtype, bos: int | None, eos: int | None
) -> dict[str, Any]:
    """The keys of config.json that mean the same for Llama and GPT-2."""
    return {
        "architectures": [architecture],
        "model_type": kind,
        "vocab_size": cfg.vocab_size,
        "initializer_range": min(cfg.std, 1.0),  # transformers 5 rejects values outside [0, 1]
        "tie_word_embeddings": cfg.tie_embeddings,
        "use_cache": True,
        "bos_token_id": bos,
        "eos_token_id": eos,
        "pad_token_id": None,
        "torch_dtype": dtype_name(dtype),  # transformers < 4.56 reads this key
        "dtype": dtype_name(dtype),  # transformers >= 4.56 reads this one
    }


def decoder_keys(cfg: GPTConfig) -> dict[str, Any]:
    """The config.json keys every RoPE decoder target (Llama, Gemma 2, the MoE three) spells alike:
    sizes, heads, context, norm ε, RoPE θ (transformers 4 reads rope_theta, transformers 5
    rope_parameters; both say the same) and the attention dropout."""
    return {
        "hidden_size": cfg.n_embd,
        "num_hidden_layers": cfg.n_layer,
        "num_attention_heads": cfg.n_head,
        "num_key_value_heads": cfg.kv_heads,
        "max_position_embeddings": cfg.block_size,
        "rms_norm_eps": cfg.norm_eps,
        "rope_theta": cfg.rope_theta,
        "rope_parameters": {"rope_type": "default", "rope_theta": cfg.rope_theta},
        "attention_dropout": cfg.dropout,
    }


def require(hf: Mapping[str, Any], key: str, where: Path) -> Any:
    """A config.json key transformers has no sensible default for."""
    if hf.get(key) is None:
        raise ValueError(f"{where}: {key!r} is missing, and a {hf['model_type']} config needs it")
    return hf[key]


def refuse(where: Path, key: str, value: Any, why: str, accepted: str) -> ValueError:
    """The error for a checkpoint feature gptlab's GPT cannot reproduce."""
    return ValueError(f"{where}: {key}={value!r} {why}; accepted: {accepted}")


def gpt_config(fields: dict[str, Any], where: Path) -> GPTConfig:
    """The GPTConfig of converted fields, whose 'ffn_hidden' is the checkpoint's FFN width.

    That width is kept as ffn_hidden only where GPTConfig's own rule (`hidden_dim`) gives another,
    and a MoE's expert width as moe.expert_hidden only where it differs from that, so a config
    exported and read back is the one it was.
    """
    fields = dict(fields)
    width = fields.pop("ffn_hidden")
    try:
        cfg = GPTConfig(**fields)
        cfg = cfg if cfg.hidden_dim == width else replace(cfg, ffn_hidden=width)
        if cfg.moe is not None and cfg.moe.expert_hidden == cfg.hidden_dim:  # null: the dense width
            cfg = replace(cfg, moe=replace(cfg.moe, expert_hidden=None))
        return cfg
    except ValueError as e:
        raise ValueError(f"{where}: {e}") from e


def rope_attention_fields(hf: Mapping[str, Any], where: Path, any_head_dim: bool = False) -> dict[str, Any]:
    """n_head, n_kv_head, n_embd, rope_theta (and attn_head_dim with `any_head_dim`) of a Llama-style
    config.json (transformers 4 or 5 spelling), refusing RoPE scaling, partial rotary and a key/value
    head count that does not group the query heads. Without `any_head_dim` (Llama: gptlab's export
    never writes another) a head_dim other than hidden_size/num_attention_heads is refused."""
    n_embd, n_head = require(hf, "hidden_size", where), require(hf, "num_attention_heads", where)
    kv_heads = hf.get("num_key_value_heads")
    # absent or null: multi-head, as transformers reads it; 0 is not (it was, as `or n_head` read it)
    kv_heads = n_head if kv_heads is None else kv_heads
    counts = isinstance(kv_heads, int) and not isinstance(kv_heads, bool) and kv_heads >= 1
    if isinstance(n_head, int) and (not counts or n_head % kv_heads):
        raise refuse(
            where,
            "num_key_value_heads",
            kv_heads,
            f"does not divide num_attention_heads={n_head} into groups of query heads"
            if counts
            else "is not a number of key/value heads",
            f"a divisor of {n_head} (grouped-query; 1: multi-query; {n_head} or null: multi-head)",
        )
    head_dim = hf.get("head_dim")
    own = head_dim is None or (isinstance(n_head, int) and head_dim * n_head == n_embd)
    if not own and not any_head_dim:
        raise refuse(
            where,
            "head_dim",
            head_dim,
            "differs from hidden_size/num_attention_heads, which gptlab always uses",
            f"{n_embd}/{n_head}",
        )
    rope_key = "rope_parameters" if hf.get("rope_parameters") else "rope_scaling"
    rope = hf.get(rope_key) or {}
    if not isinstance(rope, Mapping):
        raise refuse(where, rope_key, rope, "is not an object", "null or a JSON object")
    rope_type = rope.get("rope_type", rope.get("type", "default"))
    if rope_type != "default":
        raise refuse(where, f"{rope_key}.rope_type", rope_type, "scales RoPE", "'default'")
    partial = rope.get("partial_rotary_factor", hf.get("partial_rotary_factor", 1.0))
    if partial not in (None, 1, 1.0):
        raise refuse(where, "partial_rotary_factor", partial, "rotates part of a head", "1.0")
    out = {
        "n_head": n_head,
        "n_kv_head": None if kv_heads == n_head else kv_heads,  # null: multi-head, as gptlab writes it
        "n_embd": n_embd,
        "rope_theta": rope.get("rope_theta", hf.get("rope_theta", 10000.0)),
    }
    return out | ({"attn_head_dim": None if own else head_dim} if any_head_dim else {})
