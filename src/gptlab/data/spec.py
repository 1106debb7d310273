"""A tokenizer as plain data, stored in checkpoints so generate.py needs nothing but the file.

A spec is {'name': 'byte'} or {'name': ..., 'json': <tokenizer.json text>}: plain strings, so it
loads with torch.load(weights_only=True). Here: spec from a tokenizer, tokenizer from a spec, a spec
written as HF tokenizer files, and whether two specs tokenize alike.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gptlab.data.tokenizer_files import TOKENIZER_CONFIG_FILE, TOKENIZER_FILE


def tokenizer_spec(tokenizer: Any) -> dict[str, Any]:
    """{'name': 'byte'} or {'name': ..., 'json': <tokenizer.json text>} (plain str: weights_only-safe)."""
    if tokenizer.name == "byte":
        return {"name": "byte"}
    with tempfile.TemporaryDirectory() as tmp:
        tokenizer.save(tmp)
        return {"name": tokenizer.name, "json": (Path(tmp) / TOKENIZER_FILE).read_text()}


def tokenizer_from_spec(spec: dict[str, Any]) -> Any:
    """Rebuild the tokenizer a run trained with."""
    from gptlab.data.tokenizers import ByteTokenizer, PretrainedTokenizer

    if spec.get("name", "byte") == "byte":
        return ByteTokenizer()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / TOKENIZER_FILE
        path.write_text(spec["json"])
        return PretrainedTokenizer(str(path))


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
