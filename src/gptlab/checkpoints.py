"""Load a trained model from any of the forms the project writes: Lightning checkpoint,
consolidated single file (from an FSDP run), or an exported Hugging Face directory.

This is the one checkpoint reader: generate.py, evaluate.py and scripts/export.py all go through it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from gptlab.data.spec import tokenizer_from_spec
from gptlab.model import GPT, GPTConfig
from gptlab.training.checkpoint_io import CheckpointError, load_checkpoint_file

log = logging.getLogger(__name__)

TOKENIZER_FILE = "tokenizer.json"
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
BYTE_SPEC: dict[str, Any] = {"name": "byte"}


def _short(names: list[str], limit: int = 6) -> str:
    """A readable one-line list of tensor names, however many there are."""
    shown = ", ".join(names[:limit])
    return shown + (f", … ({len(names) - limit} more)" if len(names) > limit else "")


def _expected_shapes(cfg: GPTConfig) -> dict[str, tuple[int, ...]]:
    """GPT(cfg)'s state_dict names and shapes, built on the meta device to allocate nothing."""
    with torch.device("meta"):
        model = GPT(cfg)
    return {name: tuple(t.shape) for name, t in model.state_dict().items()}


def model_state_from_checkpoint(
    ckpt: Mapping[str, Any], where: str = "checkpoint"
) -> tuple[GPTConfig, dict[str, torch.Tensor], dict[str, Any]]:
    """(config, GPT state_dict, tokenizer spec) from a Lightning or consolidated checkpoint dict.

    Lightning: config in hyper_parameters['model'], tensors prefixed 'model.'; consolidated:
    {'model_config', 'state_dict' (bare GPT names), 'tokenizer'}. The state is checked against the
    config so a mismatch is named here rather than as a load_state_dict traceback.
    """
    if not isinstance(ckpt, Mapping) or not isinstance(ckpt.get("state_dict"), Mapping):
        found = sorted(ckpt)[:8] if isinstance(ckpt, Mapping) else type(ckpt).__name__
        raise CheckpointError(
            f"{where} has neither Lightning's 'hyper_parameters'+'state_dict' nor a consolidated "
            f"'model_config'+'state_dict' (found: {found})"
        )
    hparams = ckpt.get("hyper_parameters")
    if "hyper_parameters" in ckpt:
        field = "hyper_parameters['model']"
        model_hp = hparams.get("model") if isinstance(hparams, Mapping) else None
        tok_spec = hparams.get("tokenizer") if isinstance(hparams, Mapping) else None
        prefix = "model."
    elif "model_config" in ckpt:
        field = "model_config"
        model_hp, tok_spec, prefix = ckpt["model_config"], ckpt.get("tokenizer"), ""
    else:
        raise CheckpointError(
            f"{where} has a 'state_dict' but neither 'hyper_parameters' (Lightning) nor "
            f"'model_config' (consolidated) (found: {sorted(ckpt)[:8]})"
        )
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
    for key, value in ckpt["state_dict"].items():
        if key.startswith(prefix):
            # torch.compile wraps the module; its prefix is not part of the model's names
            state[key.removeprefix(prefix).replace("_orig_mod.", "")] = value
    if cfg.tie_embeddings and "lm_head.weight" not in state and "tok_emb.weight" in state:
        state["lm_head.weight"] = state["tok_emb.weight"]
    expected = _expected_shapes(cfg)
    missing = sorted(set(expected) - set(state))
    extra = sorted(set(state) - set(expected))
    wrong = [
        f"{k} has shape {tuple(state[k].shape)}, expected {expected[k]}"
        for k in sorted(set(expected) & set(state))
        if tuple(state[k].shape) != expected[k]
    ]
    if missing or extra or wrong:
        labelled = (("missing", missing), ("unexpected", extra), ("wrong shapes", wrong))
        problems = [f"{label}: {_short(names)}" for label, names in labelled if names]
        raise CheckpointError(f"{where}: state_dict does not match {field}; {'; '.join(problems)}")
    spec = dict(tok_spec) if isinstance(tok_spec, Mapping) and tok_spec else dict(BYTE_SPEC)
    return cfg, state, spec


def _gpt(cfg: GPTConfig, state: Mapping[str, torch.Tensor]) -> GPT:
    """GPT(cfg) holding `state` (already checked), in eval mode."""
    model = GPT(cfg)
    with torch.no_grad():
        model.load_state_dict(state, strict=True)
    return model.eval()


def is_hf_dir(path: str | Path) -> bool:
    """True for an exported (or any local) Hugging Face model directory."""
    p = Path(path)
    return p.is_dir() and (p / "config.json").is_file()


def hf_tokenizer_spec(directory: str | Path) -> dict[str, Any]:
    """The tokenizer spec of a HF directory: its tokenizer.json, or bytes when it ships none."""
    root = Path(directory)
    file = root / TOKENIZER_FILE
    if not file.is_file():
        log.warning("%s ships no %s; assuming the byte tokenizer (ids = UTF-8 bytes)", root, file)
        return dict(BYTE_SPEC)
    name = None
    config = root / TOKENIZER_CONFIG_FILE
    if config.is_file():
        try:
            name = json.loads(config.read_text()).get("gptlab_name")
        except (ValueError, AttributeError):
            name = None
    if name == "byte":
        return dict(BYTE_SPEC)
    return {"name": name or f"pretrained:{root.name}", "json": file.read_text()}


def load_checkpoint(path: str | Path) -> tuple[GPT, dict[str, Any]]:
    """(GPT in eval mode on the CPU, tokenizer spec) from a .ckpt, a consolidated file or HF dir."""
    path = Path(path)
    if is_hf_dir(path):
        from gptlab.export.hf import gpt_from_hf

        return gpt_from_hf(path), hf_tokenizer_spec(path)
    ckpt = load_checkpoint_file(path)
    cfg, state, spec = model_state_from_checkpoint(ckpt, where=f"ckpt_path={str(path)!r}")
    return _gpt(cfg, state), spec


def load_gpt(path: str | Path) -> GPT:
    """The GPT alone (eval mode, CPU) from any checkpoint form; see `load_checkpoint`."""
    return load_checkpoint(path)[0]


def load_model(path: str | Path, device: str = "cpu") -> tuple[GPT, Any]:
    """(GPT in eval mode on `device`, tokenizer) from a .ckpt, a consolidated file or HF dir."""
    model, spec = load_checkpoint(path)
    return model.to(device), tokenizer_from_spec(spec)


def write_tokenizer(spec: Mapping[str, Any], directory: str | Path) -> Path:
    """Write a tokenizer spec as tokenizer.json + tokenizer_config.json (what HF tools read)."""
    from gptlab.data.tokenizers import ByteTokenizer

    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    name = spec.get("name", "byte")
    if name == "byte":
        return ByteTokenizer().save(out)
    if not isinstance(spec.get("json"), str):
        raise ValueError(
            f"tokenizer spec {name!r} holds no 'json' text; accepted: {{'name': 'byte'}} or "
            "{'name': ..., 'json': <tokenizer.json text>}"
        )
    (out / TOKENIZER_FILE).write_text(spec["json"])
    (out / TOKENIZER_CONFIG_FILE).write_text(
        json.dumps({"tokenizer_class": "PreTrainedTokenizerFast", "gptlab_name": name}, indent=2) + "\n"
    )
    return out / TOKENIZER_FILE


def _canonical_json(spec: Mapping[str, Any]) -> str:
    """A spec's tokenizer as the tokenizers library serialises it, so formatting cannot differ."""
    import tokenizers

    from gptlab.data.tokenizers import ByteTokenizer

    if spec.get("name", "byte") == "byte":
        return ByteTokenizer().to_hf().to_str()
    return tokenizers.Tokenizer.from_str(spec["json"]).to_str()


def same_tokenizer(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two tokenizer specs map text to the same ids (names aside)."""
    if a.get("name", "byte") == b.get("name", "byte") == "byte":
        return True
    return _canonical_json(a) == _canonical_json(b)
