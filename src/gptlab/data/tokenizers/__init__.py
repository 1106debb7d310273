"""Tokenizing, the second stage: the kinds behind one protocol (base.Tokenizer) — raw bytes (byte),
a BPE trained on the corpus (bpe), a tokenizer.json (hf), a tiktoken encoding (tiktoken_encodings) —
and the fast tiktoken path for BPEs (tiktoken_bpe). build_tokenizer takes the resolved TokenizerPlan
(data.plan): nothing here reads the data config or resolves a setting's path.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from pathlib import Path

import tokenizers

from gptlab.data.plan import TokenizerPlan
from gptlab.data.tokenizer_files import TOKENIZER_CONFIG_FILE as CONFIG_FILE
from gptlab.data.tokenizer_files import TOKENIZER_FILE
from gptlab.data.tokenizers.base import BYTE_EOS, EOT, Tokenizer
from gptlab.data.tokenizers.bpe import BPETokenizer, train_or_reuse, training_sample
from gptlab.data.tokenizers.byte import ByteTokenizer
from gptlab.data.tokenizers.hf import HFTokenizer, IdTokenizer, PretrainedTokenizer, pretrained_file
from gptlab.data.tokenizers.tiktoken_bpe import bytes_to_unicode
from gptlab.data.tokenizers.tiktoken_encodings import TiktokenTokenizer

__all__ = [
    "BYTE_EOS",
    "EOT",
    "BPETokenizer",
    "ByteTokenizer",
    "HFTokenizer",
    "IdTokenizer",
    "PretrainedTokenizer",
    "TiktokenTokenizer",
    "Tokenizer",
    "build_tokenizer",
    "bytes_to_unicode",
    "load_tokenizer",
    "pretrained_file",
    "training_sample",
]


def load_tokenizer(directory: str | os.PathLike[str]) -> Tokenizer:
    """Reload any tokenizer written by `save` (the byte kind comes back as the fast native one)."""
    directory = Path(directory)
    config = directory / CONFIG_FILE
    name = json.loads(config.read_text()).get("gptlab_name") if config.is_file() else None
    if name == ByteTokenizer.name:
        return ByteTokenizer()
    if name and name.startswith("bpe"):
        return BPETokenizer.from_file(directory / TOKENIZER_FILE)
    if name and name.startswith("tiktoken:") and (directory / "tokenizer.tiktoken").is_file():
        return TiktokenTokenizer.load(directory)
    if name and name.startswith("ids"):
        return IdTokenizer(tokenizers.Tokenizer.from_file(str(directory / TOKENIZER_FILE)), name, None)
    return PretrainedTokenizer(directory, name=name)


def build_tokenizer(
    plan: TokenizerPlan,
    documents_fn: Callable[[], Iterable[str]],
    sample_fn: Callable[[], Iterable[str]] | None = None,
    train_bytes: Callable[[], int | None] | None = None,
) -> Tokenizer:
    """The planned tokenizer; documents_fn (train texts) and train_bytes (their size, when it can be
    known) are only called when BPE must train, which reads up to data.bpe_train_bytes.

    A BPE is then encoded through tiktoken if data.bpe_encoder allows and its ids are identical to
    `tokenizers`' on the first texts of sample_fn (packing passes the train texts) and the probes."""
    if plan.kind == "byte":
        return ByteTokenizer()
    if plan.kind == "tiktoken":
        return TiktokenTokenizer.from_setting(plan.tiktoken_encoding)
    if plan.kind == "bpe":
        tok: HFTokenizer = train_or_reuse(plan, documents_fn, train_bytes)
    else:
        assert plan.pretrained_file is not None
        tok = PretrainedTokenizer(plan.pretrained_file)
    tok.use_tiktoken(
        sample_fn() if sample_fn else (), plan.bpe_encoder
    )  # same ids either way: not in the key
    return tok
