"""The weight files of a HF directory: which names count, and reading them without running code.

safetensors holds tensors only; a torch .bin is read with torch.load(weights_only=True). The reason
a weights_only load failed is dug out of torch's message here, for checkpoint files as well.
"""

from __future__ import annotations

import json
import pickle
from collections.abc import Mapping
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file

# Weight files in the order transformers prefers them.
WEIGHT_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)


def weights_only_refusal(err: BaseException) -> str | None:
    """What weights_only=True refused in a torch.load failure, or None when it refused nothing.

    torch opens that message with generic advice; the informative part follows 'WeightsUnpickler
    error' (on its line or the next), before the allow-listing advice.
    """
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    for i, line in enumerate(lines):
        if "WeightsUnpickler error" in line:
            detail = line.partition("WeightsUnpickler error")[2].lstrip(": ")
            if not detail and i + 1 < len(lines):
                detail = lines[i + 1]
            return detail.partition(" Please use")[0]
    return None


def first_line(err: BaseException) -> str:
    """The first non-empty line of an error, or its type's name."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return lines[0] if lines else type(err).__name__


def read_weights(root: Path) -> dict[str, torch.Tensor]:
    """All tensors of a local HF directory: safetensors or torch .bin, single file or sharded."""
    name = next((n for n in WEIGHT_FILES if (root / n).is_file()), None)
    if name is None:
        raise FileNotFoundError(f"{root} holds no weights; expected one of {', '.join(WEIGHT_FILES)}")
    if name.endswith(".index.json"):
        weight_map = json.loads((root / name).read_text()).get("weight_map") or {}
        if not weight_map:
            raise ValueError(f"{root / name} has an empty or missing 'weight_map'")
        shards = sorted(set(weight_map.values()))
    else:
        shards = [name]
    tensors: dict[str, torch.Tensor] = {}
    for shard in shards:
        path = root / shard
        if not path.is_file():
            raise FileNotFoundError(f"{root / name} names shard {shard!r}, which is not in {root}")
        if shard.endswith(".safetensors"):
            try:
                tensors.update(load_file(str(path), device="cpu"))
            except SafetensorError as e:
                raise ValueError(f"{path} is not a readable safetensors file: {e}") from e
            continue
        try:
            loaded = torch.load(path, map_location="cpu", weights_only=True)
        except (pickle.UnpicklingError, RuntimeError, EOFError) as e:
            refused = weights_only_refusal(e)
            reason = first_line(e) if refused is None else refused
            raise ValueError(
                f"{path} could not be loaded with torch.load(weights_only=True): {reason}"
            ) from e
        if not isinstance(loaded, Mapping):
            raise ValueError(f"{path} holds a {type(loaded).__name__}, expected a state_dict")
        tensors.update(loaded)
    return tensors
