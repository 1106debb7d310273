"""config.json: the keys both targets write, and the helpers both converters read it with."""

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
    so a config exported and read back is the one it was.
    """
    fields = dict(fields)
    width = fields.pop("ffn_hidden")
    try:
        cfg = GPTConfig(**fields)
        return cfg if cfg.hidden_dim == width else replace(cfg, ffn_hidden=width)
    except ValueError as e:
        raise ValueError(f"{where}: {e}") from e
