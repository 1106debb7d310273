"""The one checkpoint reader: a Lightning .ckpt, a consolidated file or a HF directory, by its form.

generate.py, evaluate.py and scripts/export.py all load through `load_checkpoint`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from gptlab.checkpoints.consolidated import consolidated_state, is_consolidated
from gptlab.checkpoints.hf_dir import is_hf_dir, load_hf_dir
from gptlab.checkpoints.lightning import is_lightning, lightning_state
from gptlab.checkpoints.safe_load import CheckpointError, load_checkpoint_file
from gptlab.data.spec import tokenizer_from_spec
from gptlab.model import GPT, GPTConfig
from gptlab.model.masks import DOCUMENT_POSITIONS, Documents


def model_state_from_checkpoint(
    ckpt: Mapping[str, Any], where: str = "checkpoint"
) -> tuple[GPTConfig, dict[str, torch.Tensor], dict[str, Any]]:
    """(config, GPT state_dict, tokenizer spec) from a Lightning or consolidated checkpoint dict.

    The state is checked against the config so a mismatch is named here rather than as a
    load_state_dict traceback.
    """
    if not isinstance(ckpt, Mapping) or not isinstance(ckpt.get("state_dict"), Mapping):
        found = sorted(ckpt)[:8] if isinstance(ckpt, Mapping) else type(ckpt).__name__
        raise CheckpointError(
            f"{where} has neither Lightning's 'hyper_parameters'+'state_dict' nor a consolidated "
            f"'model_config'+'state_dict' (found: {found})"
        )
    if is_lightning(ckpt):
        return lightning_state(ckpt, where)
    if is_consolidated(ckpt):
        return consolidated_state(ckpt, where)
    raise CheckpointError(
        f"{where} has a 'state_dict' but neither 'hyper_parameters' (Lightning) nor "
        f"'model_config' (consolidated) (found: {sorted(ckpt)[:8]})"
    )


def documents_of(ckpt: Mapping[str, Any], where: str = "checkpoint") -> Documents | None:
    """data.document_mask's record ({"eot", "positions"}), which the model's forward masks with:
    Lightning keeps it in hyper_parameters['documents'], the consolidated file beside 'model_config'.
    A model built without it would attend across documents: a silently different loss."""
    hparams = ckpt.get("hyper_parameters")
    if is_lightning(ckpt):
        spec, field = (hparams.get("documents") if isinstance(hparams, Mapping) else None), "hyper_parameters"
    else:
        spec, field = ckpt.get("documents"), "checkpoint"
    if not spec:
        return None
    if (
        not isinstance(spec, Mapping)
        or set(spec) - {"eot", "positions"}
        or not isinstance(spec.get("eot"), int)
        or spec.get("positions", "restart") not in DOCUMENT_POSITIONS
    ):
        raise CheckpointError(
            f"{where}: {field}['documents']={spec!r} is not data.document_mask's record; expected "
            f"{{'eot': <end-of-text id>, 'positions': {' or '.join(map(repr, DOCUMENT_POSITIONS))}}} or None"
        )
    return Documents(**spec)


def _gpt(cfg: GPTConfig, state: Mapping[str, torch.Tensor], documents: Documents | None = None) -> GPT:
    """GPT(cfg) holding `state` (already checked), in eval mode, masking `documents` as it trained."""
    model = GPT(cfg, documents)
    with torch.no_grad():
        model.load_state_dict(state, strict=True)
    return model.eval()


def load_checkpoint(path: str | Path) -> tuple[GPT, dict[str, Any]]:
    """(GPT in eval mode on the CPU, tokenizer spec) from a .ckpt, a consolidated file or HF dir."""
    path = Path(path)
    if is_hf_dir(path):
        return load_hf_dir(path)
    ckpt = load_checkpoint_file(path)
    where = f"ckpt_path={str(path)!r}"
    cfg, state, spec = model_state_from_checkpoint(ckpt, where=where)
    return _gpt(cfg, state, documents_of(ckpt, where)), spec


def load_gpt(path: str | Path) -> GPT:
    """The GPT alone (eval mode, CPU) from any checkpoint form; see `load_checkpoint`."""
    return load_checkpoint(path)[0]


def load_model(path: str | Path, device: str = "cpu") -> tuple[GPT, Any]:
    """(GPT in eval mode on `device`, tokenizer) from a .ckpt, a consolidated file or HF dir."""
    model, spec = load_checkpoint(path)
    return model.to(device), tokenizer_from_spec(spec)
