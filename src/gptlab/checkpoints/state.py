"""A checkpoint's model state checked against its own config, so a mismatch is one named line.

Shared by the Lightning and consolidated formats, which differ only in where they keep the config,
the tokenizer and the tensors' prefix.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from gptlab.checkpoints.safe_load import CheckpointError
from gptlab.data.tokenizer_files import BYTE_SPEC
from gptlab.export.rules import gpt_shapes, short
from gptlab.model import GPTConfig


def checked_state(
    tensors: Mapping[str, torch.Tensor],
    model_hp: Any,
    tok_spec: Any,
    *,
    prefix: str,
    where: str,
    field: str,
) -> tuple[GPTConfig, dict[str, torch.Tensor], dict[str, Any]]:
    """(config, GPT state_dict, tokenizer spec): `tensors` under `prefix`, checked against `model_hp`.

    `field` names where the format keeps the config, for the error messages.
    """
    if not isinstance(model_hp, Mapping):
        raise CheckpointError(
            f"{where}: {field} is {type(model_hp).__name__}, expected the GPTConfig as a plain "
            "dict (save_hyperparameters with model=cfg.to_dict())"
        )
    try:
        cfg = GPTConfig.from_dict(dict(model_hp))
    except (ValueError, TypeError) as e:
        raise CheckpointError(f"{where}: {field}: {e}") from None
    state: dict[str, torch.Tensor] = {}
    for key, value in tensors.items():
        if key.startswith(prefix):
            # torch.compile wraps the module; its prefix is not part of the model's names
            state[key.removeprefix(prefix).replace("_orig_mod.", "")] = value
    if cfg.tie_embeddings and "lm_head.weight" not in state and "tok_emb.weight" in state:
        state["lm_head.weight"] = state["tok_emb.weight"]
    expected = gpt_shapes(cfg)
    missing = sorted(set(expected) - set(state))
    extra = sorted(set(state) - set(expected))
    wrong = [
        f"{k} has shape {tuple(state[k].shape)}, expected {expected[k]}"
        for k in sorted(set(expected) & set(state))
        if tuple(state[k].shape) != expected[k]
    ]
    if missing or extra or wrong:
        labelled = (("missing", missing), ("unexpected", extra), ("wrong shapes", wrong))
        problems = [f"{label}: {short(names, 6)}" for label, names in labelled if names]
        raise CheckpointError(f"{where}: state_dict does not match {field}; {'; '.join(problems)}")
    spec = dict(tok_spec) if isinstance(tok_spec, Mapping) and tok_spec else dict(BYTE_SPEC)
    return cfg, state, spec
