"""Tokenizers held as a `tokenizers.Tokenizer` (a tokenizer.json): the shared base of trained BPEs,
a user's pretrained file, and the id-only tokenizer of shards without one."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

import tiktoken
import tokenizers
from tokenizers import models, pre_tokenizers

from gptlab.data.paths import resolve_path
from gptlab.data.tokenizer_files import EOS_CANDIDATES as _EOS_CANDIDATES  # tried when no config names one
from gptlab.data.tokenizer_files import TOKENIZER_CONFIG_FILE as CONFIG_FILE
from gptlab.data.tokenizer_files import TOKENIZER_FILE
from gptlab.data.tokenizers.base import write_config
from gptlab.data.tokenizers.tiktoken_bpe import checked_encoding, encode_batch, ordinary


class HFTokenizer:
    """A `tokenizers.Tokenizer` behind the protocol (shared by the BPE and pretrained kinds).

    `fast`, when set (`use_tiktoken`), is the same BPE as a tiktoken Encoding whose ids were checked
    identical to `tokenizers`' on a sample of the corpus: encoding then goes through tiktoken."""

    fast: tiktoken.Encoding | None = None
    threads = max(1, len(os.sched_getaffinity(0)))  # tiktoken's encode_batch threads: the usable cores

    def __init__(self, tok: tokenizers.Tokenizer, name: str, eos_id: int | None) -> None:
        self.tok = ordinary(tok)  # <|endoftext|> in a text is text; packing adds the EOS ids
        self.name = name
        self.eos_id = eos_id
        self.vocab_size = tok.get_vocab_size(with_added_tokens=True)

    def use_tiktoken(self, texts: Iterable[str], mode: str = "auto") -> bool:
        """Encode through tiktoken from now on if the conversion is exact on texts (+ probes)."""
        self.fast = checked_encoding(self.tok, texts, mode, name=f"gptlab-{self.name}")
        return self.fast is not None

    def encode(self, text: str) -> list[int]:
        """Ids of text as ordinary text: no post-processor tokens, special tokens written in it read
        as their characters (packing adds EOS itself)."""
        if self.fast is not None:
            return self.fast.encode_ordinary(text)
        return self.tok.encode(text, add_special_tokens=False).ids

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        """Ids of each text, encoded in parallel by the Rust library (tiktoken's, when checked)."""
        if self.fast is not None:
            return encode_batch(self.fast, texts, self.threads)
        fast = getattr(self.tok, "encode_batch_fast", None)  # skips offsets (tokenizers >= 0.21)
        encs = (fast or self.tok.encode_batch)(texts, add_special_tokens=False)
        return [e.ids for e in encs]

    def decode(self, ids: Iterable[int]) -> str:
        """Text of ids, special tokens kept so document boundaries stay visible."""
        return self.tok.decode([int(i) for i in ids], skip_special_tokens=False)

    def eos_token(self) -> str | None:
        """The EOS token's text, or None."""
        return None if self.eos_id is None else self.tok.id_to_token(self.eos_id)

    def save(self, directory: str | os.PathLike[str]) -> Path:
        """Write tokenizer.json (+ tokenizer_config.json naming the EOS token)."""
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        self.tok.save(str(out / TOKENIZER_FILE))
        write_config(out, self.name, self.eos_token())
        return out / TOKENIZER_FILE


class PretrainedTokenizer(HFTokenizer):
    """A local tokenizer.json (e.g. GPT-2's): reuse an existing vocabulary, no training."""

    def __init__(self, path: str | os.PathLike[str], name: str | None = None) -> None:
        p = Path(path)  # resolved already: the file, or a directory holding it
        file = p / TOKENIZER_FILE if p.is_dir() else p
        tok = tokenizers.Tokenizer.from_file(str(file))
        super().__init__(tok, name or f"pretrained:{file.parent.name}", _find_eos(tok, file.parent))


class IdTokenizer(HFTokenizer):
    """Pre-tokenized shards without their tokenizer (only data.vocab_size): id i is the word "<i>".

    A WordLevel tokenizer.json, so checkpoints, generate.py and exporters handle it like any other;
    samples then read as ids ("<464> <3290> ..."): give data.tokenizer_path to see text.
    """

    @classmethod
    def of_size(cls, vocab_size: int) -> IdTokenizer:
        """The id tokenizer of vocab_size ids."""
        vocab = {f"<{i}>": i for i in range(vocab_size)}
        tok = tokenizers.Tokenizer(models.WordLevel(vocab=vocab, unk_token="<0>"))
        tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
        return cls(tok, f"ids{vocab_size}", None)


def pretrained_file(path: str | os.PathLike[str] | None) -> Path:
    """The tokenizer.json that data.tokenizer_path names (the file, or a directory holding one)."""
    if not path:
        raise ValueError(
            "data.tokenizer_path is required for data.tokenizer=pretrained "
            "(a tokenizer.json file or a directory holding one)"
        )
    p = resolve_path(path)
    file = p / TOKENIZER_FILE if p.is_dir() else p
    if not file.is_file():
        raise FileNotFoundError(
            f"data.tokenizer_path={str(path)!r}: {file} does not exist; "
            f"accepted: a {TOKENIZER_FILE} file or a directory holding one"
        )
    return file


def _find_eos(tok: tokenizers.Tokenizer, directory: Path) -> int | None:
    config = directory / CONFIG_FILE
    if config.is_file():
        settings = json.loads(config.read_text())
        if "eos_token" in settings:  # the config decides, also when it says "no EOS" (null)
            eos = settings["eos_token"]
            if isinstance(eos, dict):
                eos = eos.get("content")
            return tok.token_to_id(eos) if isinstance(eos, str) else None
    for candidate in _EOS_CANDIDATES:
        if (tid := tok.token_to_id(candidate)) is not None:
            return tid
    return None
