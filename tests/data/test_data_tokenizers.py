"""Tokenizers: byte exactness, BPE training/caching/round trip, pretrained loading, the factory."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tokenizers

from gptlab.data.resolve import resolve
from gptlab.data.tokenizers import (
    EOT,
    BPETokenizer,
    ByteTokenizer,
    PretrainedTokenizer,
    Tokenizer,
    build_tokenizer,
    load_tokenizer,
)


def test_byte_round_trip_and_replacement(docs: list[str]) -> None:
    tok = ByteTokenizer()
    assert isinstance(tok, Tokenizer)
    for text in docs:
        ids = tok.encode(text)
        assert list(ids) == list(text.encode("utf-8"))
        assert tok.decode(ids) == text
    assert tok.decode(list("é".encode())[:1]) == "\ufffd"  # cut mid-character: no exception
    with pytest.raises(ValueError, match="0..255"):
        tok.decode([256])


def test_byte_tokenizer_json_matches_native_ids(docs: list[str], tmp_path: Path) -> None:
    tok = ByteTokenizer()
    file = tok.save(tmp_path)
    hf = tokenizers.Tokenizer.from_file(str(file))
    text = "".join(docs) + "\x00\x7f\t\r"
    assert hf.encode(text).ids == list(tok.encode(text))
    assert hf.decode(hf.encode(text).ids) == text
    assert isinstance(load_tokenizer(tmp_path), ByteTokenizer)


def test_bpe_round_trip_eos_and_reload(docs: list[str], tmp_path: Path) -> None:
    bpe = BPETokenizer.train(docs * 3, vocab_size=400)
    assert 257 <= bpe.vocab_size <= 400
    assert bpe.eos_id is not None and bpe.decode([bpe.eos_id]) == EOT
    for text in docs:
        ids = bpe.encode(text)
        assert bpe.decode(ids) == text
    assert len(bpe.encode(docs[2])) < len(docs[2].encode())  # merges compress repeated text
    bpe.save(tmp_path)
    again = load_tokenizer(tmp_path)
    assert isinstance(again, BPETokenizer) and again.eos_id == bpe.eos_id
    assert again.encode_batch(docs) == bpe.encode_batch(docs)


def test_pretrained_from_file_or_directory(docs: list[str], tmp_path: Path) -> None:
    BPETokenizer.train(docs, vocab_size=300).save(tmp_path)
    by_dir = PretrainedTokenizer(tmp_path)
    by_file = PretrainedTokenizer(tmp_path / "tokenizer.json")
    assert by_dir.eos_id == by_file.eos_id is not None
    assert by_dir.encode(docs[1]) == by_file.encode(docs[1])
    assert by_dir.decode(by_dir.encode(docs[1])) == docs[1]


def test_build_tokenizer_factory(make_cfg, docs: list[str], tmp_path: Path) -> None:
    assert isinstance(build_tokenizer(resolve(make_cfg()).tokenizer, lambda: []), ByteTokenizer)
    with pytest.raises(ValueError, match="byte, bpe, pretrained"):
        build_tokenizer(resolve(make_cfg(tokenizer="sentencepiece")).tokenizer, lambda: [])
    with pytest.raises(FileNotFoundError, match=r"data\.tokenizer_path"):
        build_tokenizer(
            resolve(make_cfg(tokenizer="pretrained", tokenizer_path=str(tmp_path / "x"))).tokenizer, list
        )
    with pytest.raises(ValueError, match=r"data\.tokenizer_path"):
        build_tokenizer(resolve(make_cfg(tokenizer="pretrained")).tokenizer, list)
    with pytest.raises(ValueError, match=r"data\.bpe_vocab_size"):
        build_tokenizer(resolve(make_cfg(tokenizer="bpe", bpe_vocab_size=100)).tokenizer, list)


def test_bpe_is_cached_by_fingerprint(text_cfg, docs: list[str]) -> None:
    calls = []

    def documents() -> list[str]:
        calls.append(1)
        return docs

    cfg = text_cfg(tokenizer="bpe", bpe_vocab_size=300)
    first = build_tokenizer(resolve(cfg).tokenizer, documents)
    second = build_tokenizer(resolve(cfg).tokenizer, documents)
    assert len(calls) == 1
    assert np.array_equal(first.encode(docs[3]), second.encode(docs[3]))
    build_tokenizer(resolve(text_cfg(tokenizer="bpe", bpe_vocab_size=320)).tokenizer, documents)
    assert len(calls) == 2
