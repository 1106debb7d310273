"""Issue 37 §2: a `<|endoftext|>` written inside a document is text, with every encoder; only the
packer's own separators are EOS ids, and caches packed before this (format 2) are not reused
(tests/data/test_cache_keys.py holds the format).

Oracles: tiktoken's encode_ordinary for .tiktoken files, `tokenizers`' own encoder (a fresh object
from the saved tokenizer.json, told to read special tokens as text) for the BPE kinds, the UTF-8
bytes for byte; and the count of EOS ids, which must equal the number of documents packed.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import tiktoken
import tokenizers
from tiktoken.load import load_tiktoken_bpe

from gptlab.data.config import DataConfig
from gptlab.data.packing import prepare_tokens
from gptlab.data.tokenizers import EOT, BPETokenizer
from gptlab.data.tokenizers.hf import HFTokenizer
from gptlab.data.tokenizers.tiktoken_bpe import GPT2_PATTERN
from gptlab.data.tokenizers.tiktoken_encodings import TiktokenTokenizer

WORDS = "the cat sat on a mat and talked about tokenizers end of text".split()
QUOTING = f"A tokenizer marks the end with {EOT} and then{EOT}goes on; see <|endoftext|>."


def documents() -> list[str]:
    docs = [" ".join(WORDS[(k + i) % len(WORDS)] for i in range(25)) for k in range(30)]
    docs[3] = QUOTING  # a train document (val is every 20th: 0, 20)
    docs[20] = f"{EOT} a val document that starts and ends with it {EOT}"
    return docs


def write_ranks(path: Path) -> None:
    """256 single bytes, then every prefix of each word and ' '+word, and '<|' (a merge)."""
    ranks = {bytes([b]): b for b in range(256)}
    for piece in [*WORDS, *(" " + w for w in WORDS), "<|"]:
        raw = piece.encode()
        for k in range(2, len(raw) + 1):
            ranks.setdefault(raw[:k], len(ranks))
    path.write_text("".join(f"{base64.b64encode(t).decode()} {r}\n" for t, r in ranks.items()))


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("ordinary")
    (root / "c.txt").write_text("\n\n".join(documents()))
    write_ranks(root / "tiny.tiktoken")
    BPETokenizer.train(documents(), 320).save(root / "pretrained")
    return root


SETTINGS = {
    "byte": dict(tokenizer="byte"),
    "bpe-tokenizers": dict(tokenizer="bpe", bpe_vocab_size=320, bpe_encoder="tokenizers"),
    "bpe-tiktoken": dict(tokenizer="bpe", bpe_vocab_size=320, bpe_encoder="tiktoken"),
    "pretrained": dict(tokenizer="pretrained", tokenizer_path="pretrained", bpe_encoder="auto"),
    "tiktoken-file": dict(tokenizer="tiktoken", tiktoken_encoding="tiny.tiktoken"),
}


def oracle(kind: str, corpus: Path, cache: Path) -> tuple[Callable[[str], list[int]], int]:
    """(text -> ids, eos id) from the libraries themselves."""
    if kind == "byte":
        return (lambda t: list(t.encode("utf-8"))), 255
    if kind == "tiktoken-file":
        ranks = load_tiktoken_bpe(str(corpus / "tiny.tiktoken"))
        enc = tiktoken.Encoding(
            "o", pat_str=GPT2_PATTERN, mergeable_ranks=ranks, special_tokens={EOT: len(ranks)}
        )
        return enc.encode_ordinary, len(ranks)
    (entry,) = [p for p in cache.iterdir() if (p / "tokenizer.json").is_file()]
    tok = tokenizers.Tokenizer.from_file(str(entry / "tokenizer.json"))
    tok.encode_special_tokens = True  # the library's own switch: special tokens in a text are text
    return (lambda t: tok.encode(t, add_special_tokens=False).ids), tok.token_to_id(EOT)


@pytest.mark.parametrize("threads", [1, 2])  # tiktoken's batches: in this thread, or split over two
@pytest.mark.parametrize("kind", list(SETTINGS))
def test_endoftext_in_a_document_is_ordinary_text(
    kind: str, threads: int, corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for cls in (HFTokenizer, TiktokenTokenizer):
        monkeypatch.setattr(cls, "threads", threads)
    settings = dict(SETTINGS[kind])
    for key in ("tokenizer_path", "tiktoken_encoding"):
        if key in settings:
            settings[key] = str(corpus / settings[key])
    cache = tmp_path / "cache"
    cfg = DataConfig(source="text", path=str(corpus / "c.txt"), doc_separator="\n\n",
                     cache_dir=str(cache), num_proc=1, **settings)  # fmt: skip
    packed = prepare_tokens(cfg)
    encode, eos = oracle(kind, corpus, cache)
    assert packed.tokenizer.eos_id == eos
    expected: dict[str, list[int]] = {"train": [], "val": []}
    for i, doc in enumerate(documents()):
        expected["val" if i % 20 == 0 else "train"] += encode(doc) + [eos]
    n_eos = 0
    for split in ("train", "val"):
        got = packed.tokens(split).tolist()
        assert got == expected[split], (kind, split)
        n_eos += int(np.count_nonzero(packed.tokens(split) == eos))
    assert n_eos == sum(packed.meta["n_docs"].values()) == len(documents())  # one per boundary placed
    assert packed.tokenizer.decode(packed.tokenizer.encode(QUOTING)) == QUOTING
