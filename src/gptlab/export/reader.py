"""Read a local HF directory (Llama, GPT-2, OLMoE, Mixtral, Qwen3-MoE) as a GPTConfig and a state_dict
in gptlab's names.

Every tensor is checked against the shape the config implies, and anything missing or extra is
named, so a mismatched checkpoint fails here in one line rather than in load_state_dict.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import torch

from gptlab.export.hf_config import gpt_config
from gptlab.export.moe_rules import routing_biases
from gptlab.export.rules import from_hf, gpt_shapes, hf_shape, short
from gptlab.export.targets import ARCHS, MODEL_TYPES
from gptlab.export.weights import read_weights
from gptlab.model.config import GPTConfig
from gptlab.model.gpt import GPT


def _state_dict_from_hf(
    hf_tensors: Mapping[str, torch.Tensor], cfg: GPTConfig, kind: str, where: Path
) -> dict[str, torch.Tensor]:
    """Map HF tensors to gptlab names, checking every shape and naming anything missing or extra."""
    arch = ARCHS[kind]
    base = arch.BASE_PREFIX
    # Checkpoints saved from the bare model (e.g. the original 'gpt2') lack the base prefix.
    hf = {
        (k if k.startswith(base) or k.startswith("lm_head.") else base + k): v for k, v in hf_tensors.items()
    }
    expected = gpt_shapes(cfg)
    out: dict[str, torch.Tensor] = {}
    missing: list[str] = []
    wrong: list[str] = []
    experts: dict[str, dict[int, torch.Tensor]] = {}
    rules = arch.rules(cfg)
    for rule in rules:
        if rule.hf not in hf:
            missing.append(rule.hf)
            continue
        want = hf_shape(rule.op, [expected[n] for n in rule.ours])
        got = tuple(hf[rule.hf].shape)
        if got != want:
            wrong.append(f"{rule.hf} has shape {got}, expected {want}")
            continue
        for name, tensor in zip(rule.ours, from_hf(rule.op, hf[rule.hf]), strict=True):
            if rule.index is None:
                out[name] = tensor.contiguous()
            else:  # one expert of a MoE stack: stacked below, in expert order
                experts.setdefault(name, {})[rule.index] = tensor
    consumed = {rule.hf for rule in rules}
    if cfg.tie_embeddings:
        consumed.add("lm_head.weight")  # some tied checkpoints store the head too; HF ignores it
    extra = sorted(k for k in hf if k not in consumed and not arch.IGNORED.search(k))
    problems = []
    if missing:
        problems.append(f"missing tensors: {short(missing, 8)}")
    if wrong:
        problems.append(f"wrong shapes: {short(wrong, 4)}")
    if extra:
        problems.append(f"unexpected tensors: {short(extra, 8)}")
    if problems:
        raise ValueError(
            f"{where}: the weights do not match config.json ({arch.ARCHITECTURE}); " + "; ".join(problems)
        )
    if cfg.tie_embeddings:
        out["lm_head.weight"] = out["tok_emb.weight"]
    for name, parts in experts.items():
        out[name] = torch.stack([parts[e] for e in sorted(parts)]).contiguous()
    out |= routing_biases(expected)  # HF's routers have none: the balancing bias starts at zero
    if set(out) != set(expected):  # the map and the model disagree: a bug here, not in the input
        raise ValueError(f"internal: {kind} map misses {sorted(set(expected) ^ set(out))}")
    return out


def _read_hf_config(path: str | Path) -> tuple[GPTConfig, str, Path]:
    """(GPTConfig, model_type, directory) from a local HF directory's config.json."""
    root = Path(path)
    if not root.is_dir():
        raise FileNotFoundError(
            f"{str(root)!r} is not a directory; expected a local Hugging Face model directory "
            "holding config.json and model.safetensors (or pytorch_model.bin)"
        )
    cfg_file = root / "config.json"
    if not cfg_file.is_file():
        raise FileNotFoundError(f"{root} has no config.json; is it a Hugging Face model directory?")
    try:
        hf = json.loads(cfg_file.read_text())
    except ValueError as e:
        raise ValueError(f"{cfg_file} is not valid JSON: {e}") from e
    if not isinstance(hf, dict):
        raise ValueError(f"{cfg_file} holds a {type(hf).__name__}, expected a JSON object")
    kind = hf.get("model_type")
    if kind not in MODEL_TYPES:
        raise ValueError(
            f"{cfg_file}: model_type={kind!r} is not supported; accepted: {', '.join(MODEL_TYPES)}"
        )
    return gpt_config(ARCHS[kind].config_fields(hf, cfg_file), cfg_file), kind, root


def load_hf_config(path: str | Path) -> GPTConfig:
    """The GPTConfig of a local HF directory (any model_type of targets.ARCHS), without its weights."""
    return _read_hf_config(path)[0]


def load_hf(path: str | Path) -> tuple[GPTConfig, dict[str, torch.Tensor]]:
    """Read a local HF directory as a GPTConfig and a state_dict in gptlab's names."""
    cfg, kind, root = _read_hf_config(path)
    return cfg, _state_dict_from_hf(read_weights(root), cfg, kind, root)


def gpt_from_hf(path: str | Path) -> GPT:
    """A GPT built from a local HF directory, in eval mode like transformers' from_pretrained."""
    cfg, state = load_hf(path)
    model = GPT(cfg)
    with torch.no_grad():
        model.load_state_dict(state, strict=True)
    return model.eval()
