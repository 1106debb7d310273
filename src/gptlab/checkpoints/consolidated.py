"""The consolidated single file (from an FSDP run): {'model_config', 'state_dict', 'tokenizer'}, and
'documents' (data.document_mask's record, None without it; checkpoints/load.py's documents_of).

'state_dict' holds bare GPT names, without Lightning's 'model.' prefix.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from gptlab.checkpoints.state import checked_state
from gptlab.model import GPTConfig


def is_consolidated(ckpt: Mapping[str, Any]) -> bool:
    """Whether a checkpoint dict is in the consolidated format."""
    return "model_config" in ckpt


def consolidated_state(
    ckpt: Mapping[str, Any], where: str
) -> tuple[GPTConfig, dict[str, torch.Tensor], dict[str, Any]]:
    """(config, GPT state_dict, tokenizer spec) of a consolidated checkpoint dict."""
    return checked_state(
        ckpt["state_dict"],
        ckpt["model_config"],
        ckpt.get("tokenizer"),
        prefix="",
        where=where,
        field="model_config",
    )


def write_consolidated(
    out: Path,
    model_config: dict[str, Any],
    state: dict[str, torch.Tensor],
    tokenizer: dict[str, Any],
    documents: dict[str, Any] | None = None,
) -> Path:
    """Write the consolidated file atomically (a temporary name, then a rename)."""
    result = {
        "model_config": model_config,
        "state_dict": state,
        "tokenizer": tokenizer,
        "documents": documents,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    torch.save(result, tmp)
    os.replace(tmp, out)
    return out
