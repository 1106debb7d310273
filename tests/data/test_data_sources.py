"""Sources: local text/json/parquet, pystdlib, hub offline, and the errors users will hit."""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

import datasets
import huggingface_hub.constants
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gptlab.data.resolve import resolve_source
from gptlab.data.sources import (
    STDLIB_EXCLUDED_DIRS,
    load_documents,
    stdlib_files,
)


def test_text_files_are_documents_in_sorted_order(docs: list[str], text_cfg) -> None:
    ds = load_documents(resolve_source(text_cfg()))
    assert ds.column_names == ["text"]
    assert ds["text"] == docs


def test_comma_separated_globs(docs: list[str], text_cfg, corpus_dir: Path) -> None:
    cfg = text_cfg(path=f"{corpus_dir}/doc00.txt, {corpus_dir}/doc0[67].txt")
    assert load_documents(resolve_source(cfg))["text"] == [docs[0], docs[6], docs[7]]


def test_json_lines_with_custom_text_column(docs: list[str], make_cfg, tmp_path: Path) -> None:
    path = tmp_path / "docs.jsonl"
    path.write_text("".join(json.dumps({"id": i, "body": d}) + "\n" for i, d in enumerate(docs)))
    ds = load_documents(resolve_source(make_cfg(source="json", path=str(path), text_column="body")))
    assert ds.column_names == ["text"]
    assert ds["text"] == docs


def test_parquet(docs: list[str], make_cfg, tmp_path: Path) -> None:
    path = tmp_path / "docs.parquet"
    pq.write_table(pa.table({"text": docs, "n": list(range(len(docs)))}), path)
    assert load_documents(resolve_source(make_cfg(source="parquet", path=str(path))))["text"] == docs


def test_missing_text_column_names_the_field(make_cfg, tmp_path: Path) -> None:
    path = tmp_path / "docs.jsonl"
    path.write_text(json.dumps({"body": "x"}) + "\n")
    with pytest.raises(ValueError, match=r"data\.text_column='text'.*body"):
        load_documents(resolve_source(make_cfg(source="json", path=str(path))))


def test_missing_path_names_field_and_pattern(make_cfg, tmp_path: Path) -> None:
    pattern = str(tmp_path / "nope" / "*.txt")
    with pytest.raises(FileNotFoundError, match=r"data\.path") as err:
        load_documents(resolve_source(make_cfg(source="text", path=pattern)))
    assert pattern in str(err.value)
    with pytest.raises(FileNotFoundError, match=r"data\.path"):
        resolve_source(make_cfg(source="text", path=pattern))


def test_non_utf8_file_is_named(text_cfg, corpus_dir: Path) -> None:
    bad = corpus_dir / "latin1.txt"
    bad.write_bytes("café crème".encode("latin-1"))
    with pytest.raises(ValueError, match="not UTF-8") as err:
        load_documents(resolve_source(text_cfg()))
    assert str(bad) in str(err.value)


def test_binary_file_is_named(text_cfg, corpus_dir: Path) -> None:
    bad = corpus_dir / "blob.txt"
    bad.write_bytes(b"ELF\x00\x00\x01\x02")
    with pytest.raises(ValueError, match="binary") as err:
        load_documents(resolve_source(text_cfg()))
    assert str(bad) in str(err.value)


def test_bad_parquet_is_named(make_cfg, tmp_path: Path) -> None:
    bad = tmp_path / "x.parquet"
    bad.write_text("not parquet")
    with pytest.raises(ValueError, match="parquet") as err:
        load_documents(resolve_source(make_cfg(source="parquet", path=str(bad))))
    assert str(bad) in str(err.value)


def test_unknown_source_lists_accepted(make_cfg) -> None:
    with pytest.raises(ValueError, match="pystdlib.*text.*json.*parquet.*hub"):
        load_documents(resolve_source(make_cfg(source="csv")))


def test_max_bytes_cuts_at_a_character_boundary(docs: list[str], text_cfg) -> None:
    limit = len(docs[0].encode()) + 10  # lands inside the multi-byte characters of docs[1]
    texts = load_documents(resolve_source(text_cfg(max_bytes=limit)))["text"]
    assert texts[0] == docs[0]
    assert docs[1].startswith(texts[1])
    assert sum(len(t.encode()) for t in texts) <= limit
    assert len(texts) == 2


def test_hub_unreachable_is_one_actionable_line(make_cfg, monkeypatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    # both libraries read the variables at import time
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    cfg = make_cfg(source="hub", name="roneneldan/TinyStories-gptlab-test")
    # it fails at once: no connection tried, no back-off slept (counted, not timed: a wall-clock
    # bound fails on a loaded machine)
    connects: list[object] = []
    sleeps: list[float] = []

    def no_connect(sock: socket.socket, address: object) -> None:
        connects.append(address)
        raise OSError("the test allows no connection")

    monkeypatch.setattr(socket.socket, "connect", no_connect)
    monkeypatch.setattr(time, "sleep", sleeps.append)
    with pytest.raises(ConnectionError) as err:
        load_documents(resolve_source(cfg))
    assert connects == [] and sleeps == [], (connects, sleeps)
    msg = str(err.value)
    assert "\n" not in msg
    assert "unreachable" in msg and "data.path=" in msg


def test_hub_with_local_copy(docs: list[str], make_cfg, tmp_path: Path) -> None:
    path = tmp_path / "local_hub" / "train.jsonl"
    path.parent.mkdir()
    path.write_text("".join(json.dumps({"story": d}) + "\n" for d in docs))
    cfg = make_cfg(source="hub", name="some/set", path=str(path), text_column="story")
    assert load_documents(resolve_source(cfg))["text"] == docs


def test_pystdlib_is_nonempty_deterministic_and_filtered(make_cfg) -> None:
    root, files = stdlib_files()
    assert files == sorted(files, key=lambda p: p.as_posix())
    assert all(not (set(f.parts[:-1]) & STDLIB_EXCLUDED_DIRS) for f in files)
    assert any(f.as_posix() == "json/decoder.py" for f in files)
    cfg = make_cfg(max_bytes=200_000)
    a, b = load_documents(resolve_source(cfg))["text"], load_documents(resolve_source(cfg))["text"]
    assert a == b and len(a) > 3
    assert sum(len(t.encode()) for t in a) == 200_000
    assert a[0] == (root / files[0]).read_text(encoding="utf-8")
    assert resolve_source(cfg).fingerprint == resolve_source(make_cfg(max_bytes=200_000)).fingerprint
    assert resolve_source(cfg).fingerprint != resolve_source(make_cfg(max_bytes=100_000)).fingerprint


def test_fingerprint_tracks_file_metadata(text_cfg, corpus_dir: Path) -> None:
    cfg = text_cfg()
    before = resolve_source(cfg).fingerprint
    assert resolve_source(cfg).fingerprint == before
    f = corpus_dir / "doc03.txt"
    f.write_text(f.read_text() + "more")
    os.utime(f, ns=(time.time_ns(), time.time_ns() + 10**9))
    assert resolve_source(cfg).fingerprint != before
