"""Load a trained model from any of the forms the project writes: Lightning checkpoint,
consolidated single file (from an FSDP run), or an exported Hugging Face directory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from gptlab.data.spec import tokenizer_from_spec
from gptlab.model import GPT, GPTConfig
from gptlab.training.checkpoint_io import CheckpointError, load_checkpoint_file


def model_state_from_checkpoint(ckpt: dict[str, Any]) -> tuple[GPTConfig, dict[str, torch.Tensor], dict]:
    """(config, GPT state_dict, tokenizer spec) from a Lightning or consolidated checkpoint dict."""
    if "hyper_parameters" in ckpt and "state_dict" in ckpt:  # Lightning
        hp = ckpt["hyper_parameters"]
        prefix = "model."
        state = {k[len(prefix) :]: v for k, v in ckpt["state_dict"].items() if k.startswith(prefix)}
        return GPTConfig.from_dict(dict(hp["model"])), state, dict(hp.get("tokenizer") or {})
    if "model_config" in ckpt and "state_dict" in ckpt:  # consolidated
        cfg = GPTConfig.from_dict(dict(ckpt["model_config"]))
        return cfg, ckpt["state_dict"], dict(ckpt.get("tokenizer") or {})
    raise CheckpointError(
        "the checkpoint has neither Lightning's 'hyper_parameters'+'state_dict' nor a consolidated "
        f"'model_config'+'state_dict' (keys found: {sorted(ckpt)[:8]})"
    )


def load_model(path: str | Path, device: str = "cpu") -> tuple[GPT, Any]:
    """(GPT in eval mode, tokenizer) from a .ckpt file, a consolidated file or an HF export dir."""
    path = Path(path)
    if path.is_dir() and (path / "config.json").exists():
        from gptlab.data.tokenizers import ByteTokenizer, PretrainedTokenizer
        from gptlab.export.hf import gpt_from_hf

        model = gpt_from_hf(path)
        tok = PretrainedTokenizer(str(path)) if (path / "tokenizer.json").exists() else ByteTokenizer()
        return model.to(device).eval(), tok
    cfg, state, tok_spec = model_state_from_checkpoint(load_checkpoint_file(path))
    model = GPT(cfg)
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as err:
        raise CheckpointError(f"ckpt_path={str(path)!r} does not match its model config: "
                              f"{' '.join(str(err).split())[:300]}") from None
    return model.to(device).eval(), tokenizer_from_spec(tok_spec)
