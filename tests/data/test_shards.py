"""data.source=tokens: shards written here with numpy, windows expected from the same arrays.

The expected windows are numpy slices of the arrays the test wrote (window k of a split is
tokens[k·T : k·T + T + 1] of the split's concatenated shards), not anything the reader computes.
"""

from __future__ import annotations

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
    assert not (tmp_path / "cache").exists()  # nothing cached


def test_id_check_samples_start_middle_and_end(make_cfg, tmp_path: Path, monkeypatch) -> None:
    from gptlab.data import shards

    monkeypatch.setattr(shards, "CHECK_TOKENS", 16)  # blocks [0,16), [242,258), [484,500) of 500
    for offset, caught in ((3, True), (250, True), (490, True), (100, False)):
        tokens = ids(500, 6)
        tokens[offset] = V
        f = write_raw(tmp_path / f"t{offset}.bin", tokens)
        cfg = make_cfg(source="tokens", path=str(f), vocab_size=V, token_dtype="uint16")
        if caught:
            with pytest.raises(ValueError, match=f"at token offset {offset},"):
                TokenDataModule(cfg, block_size=T, seed=0).prepare()
        else:  # the price of an O(1) check: an id between the sampled blocks passes start-up
            TokenDataModule(cfg, block_size=T, seed=0).prepare()
