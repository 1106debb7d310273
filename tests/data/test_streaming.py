"""The streaming packer: data.doc_separator on text files, data.streaming over local parquet/json.

Expected token files are written out by hand (byte tokens: the documents' bytes, 0xFF after each),
or compared with the non-streaming path, which packs through datasets.map instead.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gptlab.data import packing, writer
from gptlab.data.packing import prepare_tokens
from gptlab.data.resolve import resolve
from gptlab.data.sources import stream as streaming

SEP = "<|endoftext|>"


def split_bytes(packed) -> dict[str, bytes]:
    return {s: np.asarray(packed.tokens(s)).astype(np.uint8).tobytes() for s in ("train", "val")}


@pytest.mark.parametrize("chunk", [5, 1 << 20])  # 5 bytes: separators straddle every read
def test_doc_separator_splits_where_the_example_says(make_cfg, tmp_path: Path, monkeypatch, chunk) -> None:
    monkeypatch.setattr(streaming, "READ_CHUNK", chunk)
    f = tmp_path / "stories.txt"
    f.write_text(f"Once upon a time.{SEP}\nBär und Öl 🙂\n{SEP}{SEP}  \n{SEP}The end.\n")
    packed = prepare_tokens(make_cfg(source="text", path=str(f), doc_separator=SEP, val_fraction=0.5))
    # documents: "Once upon a time.", "\nBär und Öl 🙂\n", "The end.\n" (empty and blank dropped);
    # document i is val iff i % 2 == 0
    assert split_bytes(packed) == {
        "val": b"Once upon a time.\xffThe end.\n\xff",
        "train": "\nBär und Öl 🙂\n".encode() + b"\xff",
    }
    assert packed.meta["n_docs"] == {"train": 1, "val": 2}


def test_blank_line_separator_escape(make_cfg, tmp_path: Path) -> None:
    f = tmp_path / "a.txt"
    f.write_text("one\ntwo\n\nthree\n\n\nfour")
    packed = prepare_tokens(make_cfg(source="text", path=str(f), doc_separator="\\n\\n", val_fraction=0.5))
    assert split_bytes(packed) == {"val": b"one\ntwo\xff\nfour\xff", "train": b"three\xff"}


def test_long_document_is_cut_into_pieces_without_eos(make_cfg, tmp_path: Path, monkeypatch, caplog) -> None:
    monkeypatch.setattr(streaming, "READ_CHUNK", 64)
    monkeypatch.setattr(streaming, "MAX_PIECE", 100)
    monkeypatch.setattr(streaming, "ONE_DOCUMENT_WARN_BYTES", 1000)
    text = "é" * 3000  # 2-byte characters: cuts must land on character boundaries
    f = tmp_path / "big.txt"
    f.write_text(text)
    with caplog.at_level(logging.WARNING):
        packed = prepare_tokens(make_cfg(source="text", path=str(f), doc_separator=SEP, val_fraction=0.1))
    warned = [r.getMessage() for r in caplog.records if "does not occur" in r.getMessage()]
    assert warned == [
        f"data.doc_separator='{SEP}' does not occur in the first 0 MB of {f}: read as one document"
    ]
    got = split_bytes(packed)
    assert got["train"] + got["val"] == text.encode() + b"\xff"  # one document: one EOS, at the end
    assert packed.meta["split_mode"] == "tokens" and len(got["val"]) == 600


def test_non_utf8_in_a_streamed_file_is_named(make_cfg, tmp_path: Path) -> None:
    f = tmp_path / "bad.txt"
    f.write_bytes(b"fine" + SEP.encode() + b"caf\xe9")
    with pytest.raises(ValueError, match="not UTF-8") as err:
        prepare_tokens(make_cfg(source="text", path=str(f), doc_separator=SEP))
    assert str(f) in str(err.value)
    assert not list((tmp_path / "cache").glob("*/meta.json"))  # nothing cached


def _write_sources(tmp_path: Path, docs: list[str]) -> dict[str, Path]:
    parquet = tmp_path / "docs.parquet"
    pq.write_table(pa.table({"story": docs, "n": list(range(len(docs)))}), parquet, row_group_size=3)
    jsonl = tmp_path / "docs.jsonl"
    jsonl.write_text("".join(json.dumps({"story": d}) + "\n" for d in docs))
    return {"parquet": parquet, "json": jsonl}


@pytest.mark.parametrize("fmt", ["parquet", "json"])
@pytest.mark.parametrize("max_bytes", [None, 700])
def test_streaming_hub_equals_the_loaded_dataset(
    make_cfg, tmp_path: Path, docs: list[str], fmt, max_bytes
) -> None:
    path = _write_sources(tmp_path, docs)[fmt]
    common = dict(source="hub", name="local/set", path=str(path), text_column="story", val_fraction=0.25)
    loaded = prepare_tokens(make_cfg(**common, max_bytes=max_bytes))
    streamed = prepare_tokens(make_cfg(**common, max_bytes=max_bytes, streaming=True))
    assert streamed.directory != loaded.directory
    assert split_bytes(streamed) == split_bytes(loaded)
    for key in ("n_tokens", "n_bytes", "n_docs"):
        assert streamed.meta[key] == loaded.meta[key]


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_process_pool_packs_the_same_stream(
    make_cfg, tmp_path: Path, docs: list[str], monkeypatch, caplog
) -> None:
    monkeypatch.setattr(writer, "BATCH_BYTES", 200)  # many small batches through the pool
    monkeypatch.setattr(packing, "STREAM_POOL", True)  # the packer never picks the pool itself
    path = _write_sources(tmp_path, docs * 5)["parquet"]
    common = dict(source="hub", path=str(path), text_column="story", streaming=True, val_fraction=0.25)
    one = prepare_tokens(make_cfg(**common, num_proc=1, cache_dir=str(tmp_path / "one")))
    with caplog.at_level(logging.INFO, logger="gptlab.data.packing"):
        two = prepare_tokens(make_cfg(**common, num_proc=2, cache_dir=str(tmp_path / "two")))
    assert "(num_proc=2)" in caplog.text
    assert split_bytes(one) == split_bytes(two)


def test_auto_processes_pack_bpe_in_one_process(make_cfg, tmp_path: Path, docs: list[str], caplog) -> None:
    """data.num_proc=2 on a streamed hub set with a BPE: one process, the faster on every corpus size
    measured (docs/performance.md, "Where processes pay"); the pool once ran here whatever the size."""
    path = _write_sources(tmp_path, docs * 5)["parquet"]
    cfg = make_cfg(source="hub", path=str(path), text_column="story", streaming=True, num_proc=2,
                   tokenizer="bpe", bpe_vocab_size=300)  # fmt: skip
    with caplog.at_level(logging.INFO, logger="gptlab.data.packing"):
        prepare_tokens(cfg)
    assert "packing a stream of documents with bpe300 (num_proc=1)" in caplog.text


def test_streaming_options_name_their_source(make_cfg, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"data\.doc_separator applies to data\.source=text, not parquet"):
        prepare_tokens(make_cfg(source="parquet", path=str(tmp_path / "x.parquet"), doc_separator=SEP))
    with pytest.raises(ValueError, match=r"data\.streaming=true applies to data\.source=hub, not text"):
        prepare_tokens(make_cfg(source="text", path=str(tmp_path), streaming=True))


def test_bpe_trains_on_a_separator_split_file(make_cfg, tmp_path: Path, monkeypatch) -> None:
    """Issue 25.9: BPE trained on the train documents of a data.doc_separator stream, end to end."""
    monkeypatch.setattr(streaming, "READ_CHUNK", 64)  # separators straddle reads
    monkeypatch.setattr(streaming, "MAX_PIECE", 100)  # the long story comes in pieces
    stories = [f"Story {i}: the cat sat on the mat and dreamed of fish number {i}.\n" for i in range(9)]
    stories[4] = "A long one, Grüße. " * 40  # ~800 bytes: cut into pieces, still one document
    f = tmp_path / "stories.txt"
    f.write_text(SEP.join(stories))
    cfg = make_cfg(source="text", path=str(f), doc_separator=SEP, tokenizer="bpe", bpe_vocab_size=300)
    cfg.val_fraction = 1 / 3  # document i is val iff i % 3 == 0
    texts = list(packing._train_texts(resolve(cfg).source, 3))
    assert "".join(texts) == "".join(s for i, s in enumerate(stories) if i % 3)  # train documents only
    assert len(texts) > 6  # the long story came as several pieces
    packed = prepare_tokens(cfg)
    tok = packed.tokenizer
    assert packed.meta["tokenizer"].startswith("bpe") and tok.eos_id is not None
    for split, want in (("train", [s for i, s in enumerate(stories) if i % 3]), ("val", stories[::3])):
        tokens = packed.tokens(split)
        assert int(tokens[-1]) == tok.eos_id and int((np.asarray(tokens) == tok.eos_id).sum()) == len(want)
        assert tok.decode(tokens).split("<|endoftext|>")[:-1] == want
