"""data.tokenizer=byte: UTF-8 bytes as ids, nothing to train."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import tokenizers
from tokenizers import decoders, models, pre_tokenizers

from gptlab.data.tokenizer_files import TOKENIZER_FILE
from gptlab.data.tokenizers.base import BYTE_EOS, EOT, write_config
from gptlab.data.tokenizers.tiktoken_bpe import bytes_to_unicode


class ByteTokenizer:
    """UTF-8 bytes as ids 0..255: no training, no unknown tokens, and bits-per-byte is exact.

    The end-of-text id is 255 (BYTE_EOS): the byte 0xFF never occurs in UTF-8, and inputs are checked
    to be UTF-8, so it cannot collide with text and the vocabulary stays 256 (model shapes, old
    checkpoints and exported tokenizers are unchanged).
    """

    name = "byte"
    vocab_size = 256
    eos_id: int | None = BYTE_EOS

    def encode(self, text: str) -> np.ndarray:
        """Ids of text (its UTF-8 bytes)."""
        return np.frombuffer(text.encode("utf-8"), dtype=np.uint8)

    def encode_batch(self, texts: list[str]) -> list[np.ndarray]:
        """Ids of each text."""
        return [self.encode(t) for t in texts]

    def decode(self, ids: Iterable[int]) -> str:
        """Text of ids, BYTE_EOS shown as <|endoftext|>; a sequence cut mid-character decodes with
        U+FFFD instead of failing."""
        arr = np.asarray(list(ids) if not isinstance(ids, np.ndarray) else ids)
        if arr.size and (arr.min() < 0 or arr.max() > 255):
            raise ValueError(f"byte tokenizer ids must be in 0..255, got {arr.min()}..{arr.max()}")
        parts = arr.astype(np.uint8).tobytes().split(bytes([BYTE_EOS]))
        return EOT.join(p.decode("utf-8", errors="replace") for p in parts)

    def to_hf(self) -> tokenizers.Tokenizer:
        """The same mapping as a `tokenizers` object (byte-level BPE without merges, id = byte)."""
        vocab = {ch: b for b, ch in bytes_to_unicode().items()}
        tok = tokenizers.Tokenizer(models.BPE(vocab=vocab, merges=[]))
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
        tok.decoder = decoders.ByteLevel()
        return tok

    def save(self, directory: str | os.PathLike[str]) -> Path:
        """Write tokenizer.json (+ tokenizer_config.json) so exporters ship one format for all."""
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        self.to_hf().save(str(out / TOKENIZER_FILE))
        write_config(out, self.name, None)
        return out / TOKENIZER_FILE
