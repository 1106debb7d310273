"""Lightning's .ckpt: the GPTConfig in hyper_parameters['model'], tensors prefixed 'model.'."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from gptlab.checkpoints.state import checked_state
from gptlab.model import GPTConfig

FIELD = "hyper_parameters['model']"


def is_lightning(ckpt: Mapping[str, Any]) -> bool:
    """Whether a checkpoint dict is one Lightning wrote (train.py's .ckpt files)."""
    return "hyper_parameters" in ckpt


def lightning_state(
    ckpt: Mapping[str, Any], where: str
) -> tuple[GPTConfig, dict[str, torch.Tensor], dict[str, Any]]:
    """(config, GPT state_dict, tokenizer spec) of a Lightning checkpoint dict."""
    hparams = ckpt.get("hyper_parameters")
    model_hp = hparams.get("model") if isinstance(hparams, Mapping) else None
    tok_spec = hparams.get("tokenizer") if isinstance(hparams, Mapping) else None
    return checked_state(ckpt["state_dict"], model_hp, tok_spec, prefix="model.", where=where, field=FIELD)
