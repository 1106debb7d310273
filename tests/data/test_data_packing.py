"""Packing: exact round trips through the token files, the split rule, caching and locking."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import numpy as np
import pytest

from gptlab.data import packing
from gptlab.data.packing import prepare_tokens, token_dtype, val_mask
from gptlab.data.tokenizers import EOT


def _split_docs(docs: list[str], val_fraction: float) -> dict[str, list[str]]:
    mask = val_mask(len(docs), val_fraction)
    return {
        "train": [d for d, v in zip(docs, mask, strict=True) if not v],
        "val": [d for d, v in zip(docs, mask, strict=True) if v],
    }


def test_val_mask_rule() -> None:
    assert val_mask(10, 0.25).tolist() == [i % 4 == 0 for i in range(10)]
    assert val_mask(1, 0.05).tolist() == [True]
    assert np.array_equal(val_mask(1000, 0.05), val_mask(1000, 0.05))
    for bad in (0, -0.1, 0.9, float("nan")):
        with pytest.raises(ValueError, match=r"data\.val_fraction"):
            val_mask(10, bad)


def test_token_dtype() -> None:
    assert token_dtype(256) == np.uint8
    assert token_dtype(257) == np.uint16
    assert token_dtype(65536) == np.uint16  # ids 0..65535
    assert token_dtype(65537) == np.uint32


def test_byte_round_trip(text_cfg, docs: list[str]) -> None:
    packed = prepare_tokens(text_cfg(val_fraction=0.25))
    expected = _split_docs(docs, 0.25)
    meta = packed.meta
    assert meta["dtype"] == "uint8" and meta["vocab_size"] == 256 and meta["eos_id"] == 0xFF
    for split in ("train", "val"):
        tokens = packed.tokens(split)
        want = b"".join(d.encode() + b"\xff" for d in expected[split])  # bytes, 0xFF after each doc
        assert np.asarray(tokens).astype(np.uint8).tobytes() == want
        assert packed.tokenizer.decode(tokens) == "".join(d + EOT for d in expected[split])
        n_bytes = sum(len(d.encode()) for d in expected[split])
        assert meta["n_bytes"][split] == n_bytes
        assert meta["n_tokens"][split] == len(tokens) == n_bytes + len(expected[split])
    assert meta["bytes_per_token"] == meta["n_bytes"]["val"] / meta["n_tokens"]["val"]
    assert (packed.directory / "tokenizer.json").is_file()


def test_bpe_round_trip_with_eos(text_cfg, docs: list[str]) -> None:
    packed = prepare_tokens(text_cfg(val_fraction=0.25, tokenizer="bpe", bpe_vocab_size=320))
    expected = _split_docs(docs, 0.25)
    tok = packed.tokenizer
    assert tok.eos_id is not None and packed.meta["tokenizer"].startswith("bpe")
    for split in ("train", "val"):
        tokens = packed.tokens(split)
        assert int(tokens[-1]) == tok.eos_id
        assert tok.decode(tokens).split(EOT)[:-1] == expected[split]
    assert packed.meta["bytes_per_token"] > 1.0


def test_second_prepare_uses_cache(text_cfg, monkeypatch, caplog) -> None:
    cfg = text_cfg(val_fraction=0.25)
    first = prepare_tokens(cfg)
    mtime = (first.directory / "train.bin").stat().st_mtime_ns

    def no_reload(cfg):
        raise AssertionError("documents were loaded again")

    monkeypatch.setattr(packing.sources, "load_documents", no_reload)
    with caplog.at_level(logging.INFO, logger="gptlab.data.packing"):
        second = prepare_tokens(cfg)
    assert "using cached tokens at" in caplog.text
    assert second.directory == first.directory and second.meta == first.meta
    assert (second.directory / "train.bin").stat().st_mtime_ns == mtime


def test_split_is_deterministic_across_caches(text_cfg, tmp_path: Path) -> None:
    a = prepare_tokens(text_cfg(val_fraction=0.25, cache_dir=str(tmp_path / "a")))
    b = prepare_tokens(text_cfg(val_fraction=0.25, cache_dir=str(tmp_path / "b")))
    assert a.directory.name == b.directory.name
    for split in ("train", "val"):
        assert a.path(split).read_bytes() == b.path(split).read_bytes()


def test_fingerprint_depends_on_settings(text_cfg) -> None:
    base = prepare_tokens(text_cfg(val_fraction=0.25)).directory.name
    assert prepare_tokens(text_cfg(val_fraction=0.5)).directory.name != base
    assert prepare_tokens(text_cfg(val_fraction=0.25, max_bytes=500)).directory.name != base


def test_concurrent_prepares_tokenize_once(text_cfg, monkeypatch) -> None:
    builds = []
    real_build = packing._build

    def counting_build(*args, **kwargs):
        builds.append(1)
        return real_build(*args, **kwargs)

    monkeypatch.setattr(packing, "_build", counting_build)
    cfg = text_cfg(val_fraction=0.25)
    results, errors = [], []

    def worker() -> None:
        try:
            results.append(prepare_tokens(cfg).meta)
        except Exception as e:  # surfaced below
            errors.append(e)

    threads = [threading.Thread(target=worker) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(builds) == 1
    assert all(m == results[0] for m in results)


def test_single_document_is_split_by_tokens(make_cfg, tmp_path: Path) -> None:
    path = tmp_path / "one.txt"
    path.write_text("x" * 1000)
    packed = prepare_tokens(make_cfg(source="text", path=str(path), val_fraction=0.1))
    assert packed.meta["split_mode"] == "tokens"
    assert packed.meta["n_tokens"] == {"train": 901, "val": 100}  # 1000 bytes + BYTE_EOS


def test_pystdlib_slice_packs(make_cfg) -> None:
    packed = prepare_tokens(make_cfg(max_bytes=300_000))
    total = sum(packed.meta["n_tokens"].values())
    assert total == 300_000 + sum(packed.meta["n_docs"].values()) and packed.meta["n_tokens"]["val"] > 0


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_process_pool_packs_the_same_tokens(text_cfg, tmp_path: Path, monkeypatch, caplog) -> None:
    cfg = dict(val_fraction=0.25, tokenizer="bpe", bpe_vocab_size=300)
    serial = prepare_tokens(text_cfg(**cfg, cache_dir=str(tmp_path / "serial")))
    monkeypatch.setattr(packing, "PARALLEL_MIN_BYTES", 0)
    with caplog.at_level(logging.INFO, logger="gptlab.data.packing"):
        pooled = prepare_tokens(text_cfg(**cfg, num_proc=2, cache_dir=str(tmp_path / "pool")))
    assert "num_proc=2" in caplog.text
    for split in ("train", "val"):
        assert serial.path(split).read_bytes() == pooled.path(split).read_bytes()
