"""data.document_mask's settings, checked, and the record the model is built with (its `Documents`):
the end-of-text id that opens each document, and whether positions restart there."""

from __future__ import annotations

from typing import Any

from gptlab.data.config import DataConfig

DOCUMENT_POSITIONS = ("restart", "continue")


def check_documents(cfg: DataConfig) -> None:
    """The switches alone, refused in one line before any data is prepared."""
    if not isinstance(cfg.document_mask, bool):
        raise ValueError(f"data.document_mask={cfg.document_mask!r} is not accepted; give true or false")
    if cfg.document_positions not in DOCUMENT_POSITIONS:
        raise ValueError(
            f"data.document_positions={cfg.document_positions!r} is not accepted; choose one of "
            f"{', '.join(DOCUMENT_POSITIONS)}"
        )


def document_spec(cfg: DataConfig, eos_id: int | None, tokenizer_name: str) -> dict[str, Any] | None:
    """{"eot": id, "positions": restart|continue} under data.document_mask, else None; a tokenizer
    without an end-of-text id cannot say where documents end: refused."""
    check_documents(cfg)
    if not cfg.document_mask:
        return None
    if eos_id is None:
        raise ValueError(
            f"data.document_mask=true needs a tokenizer with an end-of-text id; {tokenizer_name} has "
            "none (accepted: byte, bpe, tiktoken, or a pretrained tokenizer whose config names an "
            "eos_token), or set data.document_mask=false"
        )
    return {"eot": int(eos_id), "positions": cfg.document_positions}
