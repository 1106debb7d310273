"""A tokenizer as plain data, stored in checkpoints so generate.py needs nothing but the file."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any


def tokenizer_spec(tokenizer: Any) -> dict[str, Any]:
    """{'name': 'byte'} or {'name': ..., 'json': <tokenizer.json text>} (plain str: weights_only-safe)."""
    if tokenizer.name == "byte":
        return {"name": "byte"}
    with tempfile.TemporaryDirectory() as tmp:
        tokenizer.save(tmp)
        return {"name": tokenizer.name, "json": (Path(tmp) / "tokenizer.json").read_text()}


def tokenizer_from_spec(spec: dict[str, Any]) -> Any:
    """Rebuild the tokenizer a run trained with."""
    from gptlab.data.tokenizers import ByteTokenizer, PretrainedTokenizer

    if spec.get("name", "byte") == "byte":
        return ByteTokenizer()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "tokenizer.json"
        path.write_text(spec["json"])
        return PretrainedTokenizer(str(path))
