"""The data rows of docs/bad-inputs.md for shards and streamed text: one line, exit 2, nothing cached.

In-process through compose → validate → app.train (what the CLI runs); one subprocess run checks the
CLI contract itself (exit code 2, a single stderr line, metrics.json status failed).
"""

from __future__ import annotations

import json
import logging
import pickle
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gptlab.errors import USER_ERRORS, one_line
from tests.training.rel_harness import REPO, TINY, train_here

QUICK = ["trainer.max_steps=2", "trainer.val_check_interval=2", "data.source=tokens"]


def header(path: Path, tokens: np.ndarray, magic: int = 20240520, count: int | None = None) -> None:
    h = np.zeros(256, "<i4")
    h[:3] = [magic, 1, len(tokens) if count is None else count]
    path.write_bytes(h.tobytes() + tokens.tobytes())


@pytest.fixture(scope="module")
def bad(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("bad-shards")
    t = np.random.default_rng(0).integers(0, 1000, 5000).astype(np.uint16)
    header(d / "train_000001.bin", t)
    header(d / "val_000000.bin", t[:2000])
    t.tofile(d / "raw.bin")
    header(d / "truncated.bin", t, count=6000)
    header(d / "badmagic.bin", t, magic=20240521)
    oov = t.copy()
    oov[123] = 1000
    header(d / "oov.bin", oov)
    # issue 25: ids out of range between the blocks the old check sampled, empty shards, wrong dtypes
    long = np.random.default_rng(1).integers(0, 1000, 200_000).astype(np.uint16)
    long[100_000] = 1000
    header(d / "oov_middle.bin", long)
    header(d / "empty_000002.bin", t[:0])
    (d / "zero.bin").write_bytes(b"")
    t.astype(np.uint32).tofile(d / "raw32.bin")
    (d / "nanogpt").mkdir()
    t.tofile(d / "nanogpt" / "train.bin")
    (d / "nanogpt" / "meta.pkl").write_bytes(pickle.dumps({"vocab_size": 1000, "itos": {}, "stoi": {}}))
    return d


ROWS = [
    ("glob", ["data.path={bad}/nope/*.bin"], r"error: data\.path='{bad}/nope/\*\.bin': no files match"),
    (
        "mixed",
        ["data.path={bad}/train_*.bin", "data.val_path={bad}/raw.bin", "data.token_dtype=uint16"],
        r"error: data\.path: mixed shard formats: {bad}/train_000001\.bin is llm\.c header uint16 but "
        r"{bad}/raw\.bin is raw uint16",
    ),
    (
        "dtype",
        ["data.path={bad}/train_*.bin", "data.token_dtype=uint32"],
        r"error: data\.token_dtype=uint32 disagrees with {bad}/train_000001\.bin, whose header",
    ),
    (
        "count",
        ["data.path={bad}/truncated.bin"],
        r"error: data\.path: {bad}/truncated\.bin header says 6000 tokens",
    ),
    (
        "magic",
        ["data.path={bad}/badmagic.bin"],
        r"error: data\.path: {bad}/badmagic\.bin looks like an llm\.c shard",
    ),
    (
        "oov",
        ["data.path={bad}/oov.bin"],
        r"error: data\.path: {bad}/oov\.bin holds id 1000 at token offset 123, not below the vocabulary "
        r"size 1000",
    ),
    ("raw_no_dtype", ["data.path={bad}/raw.bin"], r"error: data\.token_dtype is required: {bad}/raw\.bin"),
    (
        "oov_middle",
        ["data.path={bad}/oov_middle.bin"],
        r"error: data\.path: {bad}/oov_middle\.bin holds id 1000 at token offset 100000, not below",
    ),
    (
        "empty_header",
        ["data.path='{bad}/train_*.bin,{bad}/empty_*.bin'"],
        r"error: data\.path: {bad}/empty_000002\.bin holds no tokens \(its llm\.c header says 0\)",
    ),
    (
        "empty_raw",
        ["data.path={bad}/raw.bin", "data.val_path={bad}/zero.bin", "data.token_dtype=uint16"],
        r"error: data\.path: {bad}/zero\.bin is empty \(0 bytes, no tokens\)",
    ),
    (
        "uint32_as_uint16",
        ["data.path={bad}/raw32.bin", "data.token_dtype=uint16"],
        r"error: data\.path: {bad}/raw32\.bin read as data\.token_dtype=uint16 looks like uint32 tokens: "
        r"every odd uint16 of 10000 sampled is in \{{0\}}",
    ),
    (
        "uint16_as_uint32",
        ["data.path={bad}/raw.bin", "data.token_dtype=uint32"],
        r"error: data\.path: {bad}/raw\.bin holds id \d+ at token offset \d+, not below the vocabulary "
        r"size 1000 .*a uint16 file\? set data\.token_dtype=uint16$",
    ),
    (
        "meta_pkl",
        ["data.path={bad}/nanogpt/train.bin", "data.token_dtype=uint32"],
        r"error: data\.token_dtype=uint32 disagrees with {bad}/nanogpt/meta\.pkl, whose vocab_size=1000 "
        r"is stored as uint16",
    ),
]


@pytest.mark.parametrize("row,overrides,pattern", ROWS, ids=[r[0] for r in ROWS])
def test_bad_shard_is_one_line(
    bad: Path, tmp_path: Path, row: str, overrides: list[str], pattern: str
) -> None:
    cache = tmp_path / "cache"
    args = [o.format(bad=bad) for o in overrides] + ["data.vocab_size=1000"]
    with pytest.raises(USER_ERRORS) as err:
        train_here(tmp_path / "run", cache, *QUICK, *args)
    line = one_line(err.value)
    assert re.match(pattern.format(bad=re.escape(str(bad))), line), line
    assert not cache.exists() or not list(cache.rglob("*.bin"))  # no tokens cached (id scans may be)


def test_separator_never_found_warns_one_document(tmp_path: Path, monkeypatch, caplog) -> None:
    from gptlab.data.sources import stream as streaming

    monkeypatch.setattr(streaming, "ONE_DOCUMENT_WARN_BYTES", 1 << 16)
    f = tmp_path / "nosep.txt"
    f.write_text("the cat sat on the mat\n" * 10000)
    with caplog.at_level(logging.WARNING, logger="gptlab.data.sources.stream"):
        train_here(
            tmp_path / "run",
            tmp_path / "cache",
            "trainer.max_steps=1",
            "trainer.val_check_interval=1",
            "data.source=text",
            f"data.path={f}",
            "data.doc_separator='<|endoftext|>'",
            "data.max_bytes=null",
        )
    assert "does not occur in the first 0 MB" in caplog.text and "read as one document" in caplog.text


@pytest.mark.slow
def test_cli_exit_2_single_line_failed_status(bad: Path, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    args = [*TINY, *QUICK, f"data.path={bad}/truncated.bin", "data.vocab_size=1000"]
    args += [f"data.cache_dir={tmp_path / 'cache'}", f"hydra.run.dir={run_dir}"]
    proc = subprocess.run(
        [sys.executable, str(REPO / "train.py"), *args], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "header says 6000 tokens" in lines[0]
    assert json.loads((run_dir / "metrics.json").read_text())["status"] == "failed"
