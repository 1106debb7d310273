"""The streaming packer: pieces in, train.bin/val.bin appended batch by batch, memory bounded.

Documents are numbered as they arrive and document i goes to val iff i % val_period == 0 (the rule
`packing.val_mask` applies to a whole dataset), so streaming a set packs the same tokens as loading it.
Batches of at least BATCH_BYTES (whole chunks of pieces) are encoded in this process or in a pool of
`num_proc` spawned processes (spawned, not forked: a fork after a thread pool has run can deadlock
the child); at most
2·num_proc batches are in flight, so a slow writer never lets batches pile up in memory.
"""

from __future__ import annotations

import copy
import multiprocessing
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from gptlab.data.sources.stream import Chunk
from gptlab.data.tokenizers import ByteTokenizer, Tokenizer

BATCH_BYTES = 4 << 20
_COPY_TOKENS = 4 << 20


@dataclass
class Batch:
    """Pieces with, per piece, whether it ends its document and whether its document is val."""

    raws: list[bytes] = field(default_factory=list)
    ends: list[bool] = field(default_factory=list)
    vals: list[bool] = field(default_factory=list)
    n_bytes: int = 0


def batches(chunks: Iterable[Chunk], period: int) -> Iterator[Batch]:
    """Group chunks of pieces into ~BATCH_BYTES batches, assigning each document its side."""
    doc = 0
    batch = Batch()
    for raws, ends in chunks:
        ends_arr = np.asarray(ends, dtype=bool)
        docs = doc + np.concatenate([[0], np.cumsum(ends_arr[:-1])]) if len(ends) else ends_arr
        batch.raws += raws
        batch.ends += ends
        batch.vals += (np.asarray(docs) % period == 0).tolist()
        batch.n_bytes += sum(map(len, raws))
        doc += int(ends_arr.sum())
        if batch.n_bytes >= BATCH_BYTES:
            yield batch
            batch = Batch()
    if batch.raws:
        yield batch


def encode(
    tokenizer: Tokenizer, dtype: np.dtype, raws: list[bytes], ends: list[bool]
) -> tuple[np.ndarray, np.ndarray]:
    """(token values of the batch, tokens per piece), an end-of-text id after each document's end."""
    eos = tokenizer.eos_id
    if isinstance(tokenizer, ByteTokenizer):  # ids are the bytes: one join, no per-document arrays
        sizes = np.fromiter(map(len, raws), np.int64, len(raws))
        ends_arr = np.asarray(ends, dtype=bool)
        if eos is None:
            return np.frombuffer(b"".join(raws), np.uint8).astype(dtype), sizes
        tail = bytes([eos])
        if ends_arr.all():  # the common case: every piece is a whole document
            joined = tail.join(raws) + tail
        else:
            joined = b"".join(r + tail if e else r for r, e in zip(raws, ends, strict=True))
        return np.frombuffer(joined, np.uint8).astype(dtype), sizes + ends_arr
    ids = tokenizer.encode_batch([r.decode("utf-8") for r in raws])
    arrays = [
        np.asarray(list(x) + [eos] if e and eos is not None else x, dtype=dtype)
        for x, e in zip(ids, ends, strict=True)
    ]
    lengths = np.array([len(a) for a in arrays], np.int64)
    return (np.concatenate(arrays) if arrays else np.zeros(0, dtype)), lengths


_worker: dict[str, Any] = {}


def _init_worker(tokenizer: Tokenizer, dtype: np.dtype) -> None:
    _worker.update(tokenizer=tokenizer, dtype=dtype)


def _encode_in_worker(raws: list[bytes], ends: list[bool]) -> tuple[np.ndarray, np.ndarray]:
    return encode(_worker["tokenizer"], _worker["dtype"], raws, ends)


def _encoded(
    batch_iter: Iterable[Batch], tokenizer: Tokenizer, dtype: np.dtype, num_proc: int
) -> Iterator[tuple[Batch, tuple[np.ndarray, np.ndarray]]]:
    if num_proc <= 1:
        for b in batch_iter:
            yield b, encode(tokenizer, dtype, b.raws, b.ends)
        return
    if hasattr(tokenizer, "threads"):  # tiktoken's threads: the pool's processes share the cores
        tokenizer = copy.copy(tokenizer)
        tokenizer.threads = max(1, tokenizer.threads // num_proc)
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(num_proc, initializer=_init_worker, initargs=(tokenizer, dtype)) as pool:
        pending: deque = deque()
        for b in batch_iter:
            pending.append((b, pool.apply_async(_encode_in_worker, (b.raws, b.ends))))
            if len(pending) >= 2 * num_proc:
                done, res = pending.popleft()
                yield done, res.get()
        while pending:
            done, res = pending.popleft()
            yield done, res.get()


def write_stream(
    pieces: Iterable[Chunk], tokenizer: Tokenizer, dtype: np.dtype, out: Path, period: int, num_proc: int = 1
) -> dict[str, dict[str, int]]:
    """Pack pieces into out/train.bin and out/val.bin; per-split token, byte and document counts."""
    counts = {s: {"tokens": 0, "bytes": 0, "docs": 0} for s in ("train", "val")}
    with open(out / "train.bin", "wb") as ftrain, open(out / "val.bin", "wb") as fval:
        for b, (values, lengths) in _encoded(batches(pieces, period), tokenizer, dtype, num_proc):
            vals = np.array(b.vals, dtype=bool)
            offsets = np.concatenate([[0], np.cumsum(lengths)])
            # runs of consecutive pieces on one side: one write each, no per-token mask
            change = np.flatnonzero(vals[1:] != vals[:-1]) + 1
            for a, z in zip(
                np.concatenate([[0], change]), np.concatenate([change, [len(vals)]]), strict=True
            ):
                (fval if vals[a] else ftrain).write(values[offsets[a] : offsets[z]])
            sizes = np.fromiter(map(len, b.raws), np.int64, len(b.raws))
            ends = np.array(b.ends, dtype=bool)
            for split, sel in (("train", ~vals), ("val", vals)):
                counts[split]["tokens"] += int(lengths[sel].sum())
                counts[split]["bytes"] += int(sizes[sel].sum())
                counts[split]["docs"] += int((ends & sel).sum())
    return counts


def split_last_tokens(out: Path, dtype: np.dtype, val_fraction: float) -> tuple[int, int]:
    """One document (all in val.bin): move its first tokens to train.bin, keeping the last
    val_fraction in val.bin, copying in bounded chunks. Returns (train tokens, val tokens)."""
    src = np.memmap(out / "val.bin", dtype=dtype, mode="r")
    n = len(src)
    n_val = max(1, int(round(n * val_fraction)))
    with open(out / "train.bin", "wb") as fh:
        for i in range(0, n - n_val, _COPY_TOKENS):
            fh.write(src[i : min(i + _COPY_TOKENS, n - n_val)].tobytes())
    with open(out / "val.tail", "wb") as fh:
        for i in range(n - n_val, n, _COPY_TOKENS):
            fh.write(src[i : min(i + _COPY_TOKENS, n)].tobytes())
    del src
    (out / "val.tail").replace(out / "val.bin")
    return n - n_val, n_val
