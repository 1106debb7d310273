"""data.source=tokens: shards written here with numpy, windows expected from the same arrays.

The expected windows are numpy slices of the arrays the test wrote (window k of a split is
tokens[k·T : k·T + T + 1] of the split's concatenated shards), not anything the reader computes.
"""

from __future__ import annotations

import json
import logging
import os
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch

from gptlab.data.datamodule import TokenDataModule
from gptlab.data.tokenizers import BPETokenizer

MAGIC, T, V = 20240520, 8, 300


def write_raw(path: Path, tokens: np.ndarray) -> Path:
    tokens.tofile(path)
    return path


def write_headered(
    path: Path, tokens: np.ndarray, version: int = 1, count: int | None = None, magic: int = MAGIC
) -> Path:
    header = np.zeros(256, dtype="<i4")
    header[:3] = [magic, version, len(tokens) if count is None else count]
    with open(path, "wb") as fh:
        fh.write(header.tobytes())
        fh.write(tokens.tobytes())
    return path


def ids(n: int, seed: int, dtype: type = np.uint16) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, V, n).astype(dtype)


def windows(tokens: np.ndarray) -> np.ndarray:
    n = (len(tokens) - 1) // T
    return np.stack([tokens[k * T : k * T + T + 1] for k in range(n)]).astype(np.int64)


def module(make_cfg, **kw: object) -> TokenDataModule:
    cfg = make_cfg(source="tokens", vocab_size=V, batch_size=4, val_windows=0, **kw)
    dm = TokenDataModule(cfg, block_size=T, seed=3)
    dm.setup("fit")
    return dm


def all_windows(dm: TokenDataModule, split: str) -> np.ndarray:
    ds = dm.dataset(split)
    return np.stack([ds[k] for k in range(len(ds))]).astype(np.int64)


def test_raw_and_headered_shards_give_identical_batches(make_cfg, tmp_path: Path) -> None:
    train = [ids(203, 1), ids(150, 2)]  # two shards: windows span the boundary
    val = ids(77, 3)
    for layout, write, dtype in (("raw", write_raw, "uint16"), ("llmc", write_headered, None)):
        d = tmp_path / layout
        d.mkdir()
        for i, t in enumerate(train):
            write(d / f"train_{i:06d}.bin", t)
        write(d / "val_000000.bin", val)
        kw = {"token_dtype": dtype} if dtype else {}
        dm = module(make_cfg, path=str(d / "train_*.bin"), val_path=str(d / "val_*.bin"), **kw)
        assert np.array_equal(all_windows(dm, "train"), windows(np.concatenate(train)))
        rows = torch.cat([b[0] for b in dm.val_dataloader()]).numpy()
        assert np.array_equal(rows, windows(val))  # through the validation subset path
        batches = [b.numpy() for b, _ in zip(dm.train_dataloader(), range(5), strict=False)]
        if layout == "raw":
            raw_batches = batches
        else:
            assert all(np.array_equal(a, b) for a, b in zip(raw_batches, batches, strict=True))
            assert dm.meta["layout"] == "llm.c header uint16"


def test_uint32_header_version_2(make_cfg, tmp_path: Path) -> None:
    tokens = ids(120, 4, np.uint32) + 70000
    write_headered(tmp_path / "a.bin", tokens, version=2)
    write_headered(tmp_path / "b.bin", tokens[:50], version=2)
    cfg = make_cfg(
        source="tokens", vocab_size=70000 + V, path=str(tmp_path / "a.bin"), val_path=str(tmp_path / "b.bin")
    )
    dm = TokenDataModule(cfg, block_size=T, seed=0)
    assert np.array_equal(all_windows(dm, "train"), windows(tokens))


def test_held_out_by_shard_and_single_shard_by_tokens(make_cfg, tmp_path: Path) -> None:
    shards = [ids(100 + i, 10 + i) for i in range(4)]
    for i, s in enumerate(shards):
        write_raw(tmp_path / f"s{i}.bin", s)
    dm = module(make_cfg, path=str(tmp_path / "s*.bin"), token_dtype="uint16", val_fraction=0.25)
    assert dm.meta["split_mode"] == "shards"  # shard 0 (of every 4) is val
    assert np.array_equal(all_windows(dm, "val"), windows(shards[0]))
    assert np.array_equal(all_windows(dm, "train"), windows(np.concatenate(shards[1:])))
    one = module(make_cfg, path=str(tmp_path / "s3.bin"), token_dtype="uint16", val_fraction=0.25)
    assert one.meta["n_tokens"] == {"train": 77, "val": 26}
    assert np.array_equal(all_windows(one, "val"), windows(shards[3][77:]))


def test_tokenizer_path_decodes_and_sets_the_vocabulary(make_cfg, tmp_path: Path, docs: list[str]) -> None:
    bpe = BPETokenizer.train(docs * 3, vocab_size=300)
    bpe.save(tmp_path / "tok")
    tokens = np.concatenate([np.asarray(bpe.encode(d) + [bpe.eos_id], np.uint16) for d in docs])
    write_raw(tmp_path / "t.bin", tokens)
    cfg = make_cfg(
        source="tokens",
        path=str(tmp_path / "t.bin"),
        token_dtype="uint16",
        tokenizer_path=str(tmp_path / "tok"),
    )
    dm = TokenDataModule(cfg, block_size=T, seed=0)
    dm.prepare()
    assert dm.vocab_size == bpe.vocab_size and dm.bytes_per_token > 1
    prompt = dm.sample_prompt()  # val is the shard's tail, cut mid-document: the next document starts
    assert docs[-1].startswith(dm.decode(prompt))


def one_line_error(make_cfg, exc: type[BaseException], **kw: object) -> str:
    with pytest.raises(exc) as err:
        TokenDataModule(make_cfg(source="tokens", **kw), block_size=T, seed=0).prepare()
    msg = str(err.value)
    assert "\n" not in msg
    return msg


def test_bad_shards_are_one_line_errors(make_cfg, tmp_path: Path) -> None:
    tokens = ids(500, 5)
    bad_magic = write_headered(tmp_path / "magic.bin", tokens, magic=1234)
    msg = one_line_error(make_cfg, ValueError, path=str(bad_magic), vocab_size=V)
    assert str(bad_magic) in msg and "magic is 1234" in msg
    short = write_headered(tmp_path / "count.bin", tokens, count=600)
    msg = one_line_error(make_cfg, ValueError, path=str(short), vocab_size=V)
    assert str(short) in msg and "header says 600 tokens" in msg and "1024+" not in msg
    oov = tokens.copy()
    oov[497] = V  # in the sampled tail
    f = write_raw(tmp_path / "oov.bin", oov)
    msg = one_line_error(make_cfg, ValueError, path=str(f), vocab_size=V, token_dtype="uint16")
    assert f"{f} holds id {V} at token offset 497" in msg and f"data.vocab_size={V}" in msg
    good = write_headered(tmp_path / "good.bin", tokens)
    msg = one_line_error(make_cfg, ValueError, path=str(good), vocab_size=V, token_dtype="uint32")
    assert "data.token_dtype=uint32 disagrees" in msg and str(good) in msg
    raw = write_raw(tmp_path / "raw.bin", tokens)
    msg = one_line_error(make_cfg, ValueError, path=str(raw), vocab_size=V)
    assert "data.token_dtype is required" in msg and str(raw) in msg
    msg = one_line_error(
        make_cfg, ValueError, path=str(good), val_path=str(raw), vocab_size=V, token_dtype="uint16"
    )
    assert "mixed shard formats" in msg and str(good) in msg and str(raw) in msg
    msg = one_line_error(make_cfg, FileNotFoundError, path=str(tmp_path / "none_*.bin"), vocab_size=V)
    assert "data.path" in msg and "none_*.bin" in msg
    msg = one_line_error(
        make_cfg, FileNotFoundError, path=str(good), val_path=str(tmp_path / "v*.bin"), vocab_size=V
    )
    assert "data.val_path" in msg
    msg = one_line_error(make_cfg, ValueError, path=str(good))
    assert "data.vocab_size or data.tokenizer_path" in msg
    cached = [f for f in (tmp_path / "cache").rglob("*") if f.is_file()]
    assert all(f.parent.name == "shard_scans" for f in cached)  # only id scans, no tokens


def test_id_check_scans_every_token(make_cfg, tmp_path: Path, monkeypatch) -> None:
    """Issue 25.7: an id out of range anywhere is refused at start-up, not by an IndexError mid-run."""
    from gptlab.data import shard_format, shard_scan

    monkeypatch.setattr(
        shard_format, "CHECK_TOKENS", 16
    )  # the old sampled blocks: [0,16), [242,258), [484,500)
    monkeypatch.setattr(shard_scan, "SCAN_TOKENS", 64)  # chunk edges at 64, 128, ...: 100 and 127/128 between
    for offset in (3, 100, 127, 128, 250, 499):
        tokens = ids(500, 6)
        tokens[offset] = V + 7
        tokens[offset + 1 :] = np.minimum(tokens[offset + 1 :], V - 1)  # later ids in range
        f = write_raw(tmp_path / f"t{offset}.bin", tokens)
        cfg = make_cfg(source="tokens", path=str(f), vocab_size=V, token_dtype="uint16")
        with pytest.raises(ValueError, match=f"holds id {V + 7} at token offset {offset},"):
            TokenDataModule(cfg, block_size=T, seed=0).prepare()


def test_id_scan_is_cached_by_size_and_mtime(make_cfg, tmp_path: Path, monkeypatch) -> None:
    from gptlab.data import shard_scan

    scans: list[Path] = []
    real = shard_scan.scan_max
    monkeypatch.setattr(shard_scan, "scan_max", lambda shard: scans.append(shard.path) or real(shard))
    tokens = ids(500, 7)
    f = write_raw(tmp_path / "t.bin", tokens)
    cfg = make_cfg(source="tokens", path=str(f), vocab_size=V, token_dtype="uint16")
    TokenDataModule(cfg, block_size=T, seed=0).prepare()
    TokenDataModule(cfg, block_size=T, seed=0).prepare()
    assert scans == [f]  # the second run read the record, not the tokens
    (record,) = (tmp_path / "cache" / "shard_scans").glob("*.json")
    got = json.loads(record.read_text())
    assert got["max_id"] == int(tokens.max()) and got["max_at"] == int(np.argmax(tokens))
    assert got["path"] == str(f.resolve()) and got["bytes"] == f.stat().st_size
    tokens[400] = V  # same size, new contents and mtime: scanned again, and refused
    write_raw(f, tokens)
    os.utime(f, ns=(f.stat().st_atime_ns, f.stat().st_mtime_ns + 10**9))
    with pytest.raises(ValueError, match=f"holds id {V} at token offset 400,"):
        TokenDataModule(cfg, block_size=T, seed=0).prepare()
    assert scans == [f, f]
    cfg32 = make_cfg(source="tokens", path=str(f), vocab_size=V, token_dtype="uint32")
    with pytest.raises(ValueError, match="holds id"):  # another layout of the file: its own record
        TokenDataModule(cfg32, block_size=T, seed=0).prepare()
    assert scans == [f, f, f] and len(list(record.parent.glob("*.json"))) == 2


def test_empty_shards_are_named(make_cfg, tmp_path: Path) -> None:
    """Issue 25.10: a 0-byte raw shard and an llm.c header counting 0 tokens, refused when opened."""
    good = write_headered(tmp_path / "train_000001.bin", ids(500, 8))
    empty = write_headered(tmp_path / "train_000002.bin", ids(0, 8))
    msg = one_line_error(make_cfg, ValueError, path=str(tmp_path / "train_*.bin"), vocab_size=V)
    assert msg.startswith(f"data.path: {empty} holds no tokens (its llm.c header says 0)"), msg
    raw = write_raw(tmp_path / "raw.bin", ids(500, 8))
    zero = tmp_path / "zero.bin"
    zero.write_bytes(b"")
    for kw in ({"path": str(zero)}, {"path": str(raw), "val_path": str(zero)}):
        msg = one_line_error(make_cfg, ValueError, vocab_size=V, token_dtype="uint16", **kw)
        assert msg.startswith(f"data.path: {zero} is empty (0 bytes, no tokens)"), msg
    assert good.exists()


def test_uint32_file_read_as_uint16_is_refused(make_cfg, tmp_path: Path) -> None:
    """Issue 25.6: little-endian uint32 ids read as uint16 put 0 (the high half) at every odd position."""
    small = write_raw(tmp_path / "small.bin", ids(5000, 9, np.uint32))  # ids < 300: high halves all 0
    msg = one_line_error(make_cfg, ValueError, path=str(small), vocab_size=V, token_dtype="uint16")
    assert msg.startswith(f"data.path: {small} read as data.token_dtype=uint16 looks like uint32 tokens")
    assert "in {0}" in msg and msg.endswith("set data.token_dtype=uint32")
    big = np.random.default_rng(10).integers(0, 100_277, 5000).astype(np.uint32)  # high halves 0 and 1
    wide = write_raw(tmp_path / "wide.bin", big)
    msg = one_line_error(make_cfg, ValueError, path=str(wide), vocab_size=100_277, token_dtype="uint16")
    assert "looks like uint32 tokens" in msg and "in {0, 1}" in msg
    dm = module(make_cfg, path=str(small), token_dtype="uint32")  # read as what it is: fine
    assert np.array_equal(all_windows(dm, "train")[0], np.fromfile(small, np.uint32)[: T + 1])
    # real uint16 streams have the same ids at odd and even positions: not refused, whatever the vocab
    for vocab, n in ((65, 5000), (V, 5000), (50257, 3)):
        tokens = np.random.default_rng(vocab).integers(0, vocab, n).astype(np.uint16)
        f = write_raw(tmp_path / f"u16_{vocab}.bin", tokens)
        cfg = make_cfg(source="tokens", path=str(f), vocab_size=vocab, token_dtype="uint16")
        assert TokenDataModule(cfg, block_size=2, seed=0).prepare().meta["dtype"] == "uint16"


def test_uint16_file_read_as_uint32_is_hinted(make_cfg, tmp_path: Path) -> None:
    tokens = ids(5000, 11)
    f = write_raw(tmp_path / "u16.bin", tokens)
    msg = one_line_error(make_cfg, ValueError, path=str(f), vocab_size=V, token_dtype="uint32")
    assert f"{f} holds id" in msg and msg.endswith("a uint16 file? set data.token_dtype=uint16")
    odd = write_raw(tmp_path / "odd.bin", tokens[:4999])  # 9998 bytes: not a whole number of uint32
    msg = one_line_error(make_cfg, ValueError, path=str(odd), vocab_size=V, token_dtype="uint32")
    assert "has 9998 bytes, not a whole number of data.token_dtype=uint32 tokens" in msg


def test_nanogpt_meta_pkl_names_the_dtype(make_cfg, tmp_path: Path) -> None:
    """nanoGPT's prepare.py writes meta.pkl (vocab_size, stoi, itos) next to uint16 train.bin/val.bin."""
    chars = sorted(set("hello world, said the shakespeare char model"))
    meta = {
        "vocab_size": len(chars),
        "itos": dict(enumerate(chars)),
        "stoi": {c: i for i, c in enumerate(chars)},
    }
    (tmp_path / "meta.pkl").write_bytes(pickle.dumps(meta))
    tokens = np.random.default_rng(12).integers(0, len(chars), 3000).astype(np.uint16)
    f = write_raw(tmp_path / "train.bin", tokens)
    kw = {"path": str(f), "vocab_size": len(chars)}
    msg = one_line_error(make_cfg, ValueError, token_dtype="uint32", **kw)
    assert msg == (
        f"data.token_dtype=uint32 disagrees with {tmp_path / 'meta.pkl'}, whose vocab_size={len(chars)} "
        "is stored as uint16 (nanoGPT's prepare.py); set data.token_dtype=uint16"
    )
    msg = one_line_error(make_cfg, ValueError, **kw)
    assert msg.startswith("data.token_dtype is required") and msg.endswith("use data.token_dtype=uint16")
    cfg = make_cfg(source="tokens", token_dtype="uint16", **kw)
    assert TokenDataModule(cfg, block_size=T, seed=0).prepare().meta["n_tokens"]["train"] > 0
    (tmp_path / "meta.pkl").write_bytes(pickle.dumps({"vocab_size": 100_000}))
    msg = one_line_error(make_cfg, ValueError, token_dtype="uint16", **kw)
    assert "vocab_size=100000 is stored as uint32" in msg


def test_meta_pkl_never_runs_code(make_cfg, tmp_path: Path, caplog) -> None:
    (tmp_path / "meta.pkl").write_bytes(pickle.dumps({"vocab_size": 10, "path": Path("/x")}))
    f = write_raw(tmp_path / "train.bin", ids(3000, 13))
    cfg = make_cfg(source="tokens", path=str(f), vocab_size=V, token_dtype="uint16")
    with caplog.at_level(logging.WARNING, logger="gptlab.data.shard_format"):
        TokenDataModule(cfg, block_size=T, seed=0).prepare()
    assert "is not nanoGPT's meta.pkl" in caplog.text and "is not loaded from a meta.pkl" in caplog.text
