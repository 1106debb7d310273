"""The tokenizer protocol every kind implements, and the end-of-text conventions they share."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from gptlab.data.tokenizer_files import TOKENIZER_CONFIG_FILE as CONFIG_FILE

EOT = "<|endoftext|>"
BYTE_EOS = 0xFF  # the byte tokenizer's end-of-text id: a byte value UTF-8 never uses


@runtime_checkable
class Tokenizer(Protocol):
    """What packing, the datamodule, generation and exporters need from a tokenizer."""

    name: str
    vocab_size: int
    eos_id: int | None

    def encode(self, text: str) -> list[int] | np.ndarray: ...

    def encode_batch(self, texts: list[str]) -> list[list[int]] | list[np.ndarray]: ...

    def decode(self, ids: Iterable[int]) -> str: ...

    def save(self, directory: str | os.PathLike[str]) -> Path: ...


def _write_config(directory: Path, name: str, eos: str | None) -> None:
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": eos, "gptlab_name": name}
    (directory / CONFIG_FILE).write_text(json.dumps(config, indent=2) + "\n")


def write_config(directory: Path, name: str, eos: str | None) -> None:
    """tokenizer_config.json: the class HF tools load it with, the EOS token, gptlab's name for it."""
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": eos, "gptlab_name": name}
    (directory / CONFIG_FILE).write_text(json.dumps(config, indent=2) + "\n")
