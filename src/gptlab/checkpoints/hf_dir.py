"""An exported (or any local) Hugging Face directory as a checkpoint: the GPT and its tokenizer.

The reading itself (config.json, weights, names) is gptlab.export's, beside the name rules it
inverts; this is only the third format of `load_checkpoint`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gptlab.data.tokenizer_files import hf_tokenizer_spec
from gptlab.export import gpt_from_hf
from gptlab.model import GPT


def is_hf_dir(path: str | Path) -> bool:
    """True for an exported (or any local) Hugging Face model directory."""
    p = Path(path)
    return p.is_dir() and (p / "config.json").is_file()


def load_hf_dir(path: str | Path) -> tuple[GPT, dict[str, Any]]:
    """(GPT in eval mode on the CPU, tokenizer spec) of a HF directory."""
    return gpt_from_hf(path), hf_tokenizer_spec(path)
