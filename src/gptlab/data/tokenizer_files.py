"""The tokenizer files of a Hugging Face directory: their names, the special tokens, a spec from them.

Plain JSON reading only (no tokenizer library), so the exporter and the checkpoint loaders can use it
without importing the data pipeline; the `tokenizers` package takes its file names from here too.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

TOKENIZER_FILE = "tokenizer.json"
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
BYTE_SPEC: dict[str, Any] = {"name": "byte"}
# Special tokens tokenizer families end a document with, in the order they are tried: packing
# appends the first one a tokenizer has, and export names the same one as the model's eos.
EOS_CANDIDATES = ("<|endoftext|>", "</s>", "<|end_of_text|>", "<eos>", "<|eot_id|>", "[SEP]")
BOS_CANDIDATES = ("<s>", "<bos>", "<|bos|>", "<|begin_of_text|>")


def gptlab_name(directory: str | Path) -> str | None:
    """The gptlab tokenizer name its tokenizer_config.json records ('byte', 'bpe300', ...), if any."""
    config = Path(directory) / TOKENIZER_CONFIG_FILE
    try:
        name = json.loads(config.read_text()).get("gptlab_name") if config.is_file() else None
    except (OSError, ValueError, AttributeError):
        return None
    return name if isinstance(name, str) else None


def hf_tokenizer_spec(directory: str | Path) -> dict[str, Any]:
    """The tokenizer spec of a HF directory: its tokenizer.json, or bytes when it ships none."""
    root = Path(directory)
    file = root / TOKENIZER_FILE
    if not file.is_file():
        log.warning("%s ships no %s; assuming the byte tokenizer (ids = UTF-8 bytes)", root, file)
        return dict(BYTE_SPEC)
    name = gptlab_name(root)
    if name == "byte":
        return dict(BYTE_SPEC)
    return {"name": name or f"pretrained:{root.name}", "json": file.read_text()}


def special_tokens(tokenizer_json: Path | None) -> dict[str, tuple[str, int]]:
    """'bos'/'eos' -> (token, id) from a tokenizer.json's special tokens, so HF generation stops."""
    if tokenizer_json is None:
        return {}
    try:
        added = json.loads(tokenizer_json.read_text()).get("added_tokens") or []
    except (OSError, ValueError, AttributeError):
        log.warning("could not read special tokens from %s; bos/eos left unset", tokenizer_json)
        return {}
    ids = {t.get("content"): t.get("id") for t in added if isinstance(t, dict) and t.get("special")}
    found: dict[str, tuple[str, int]] = {}
    for role, candidates in (("bos", BOS_CANDIDATES), ("eos", EOS_CANDIDATES)):
        token = next((t for t in candidates if isinstance(ids.get(t), int)), None)
        if token is not None:
            found[role] = (token, ids[token])
    return found
