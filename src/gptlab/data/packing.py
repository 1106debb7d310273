"""Tokenize documents once into flat train/val token files, cached by fingerprint and shared safely.

Cache location: `data.cache_dir`, resolved by `sources.resolve_path`: an absolute path is used as
is; a relative one is taken against the original working directory (Hydra's when Hydra is
initialised, else the process's cwd). Layout:
`<cache_dir>/<fingerprint>/{train.bin,val.bin,meta.json,verified.json,tokenizer.json,tokenizer_config.json}`.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import datasets
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from gptlab.data import integrity
from gptlab.data.config import DataConfig
from gptlab.data.sources import (
    load_documents,
    resolve_files,
    resolve_path,
    source_fingerprint,
    source_size_bound,
    stable_hash,
)
from gptlab.data.streaming import pieces, streamed
from gptlab.data.tokenizers import Tokenizer, build_tokenizer, load_tokenizer, tokenizer_identity
from gptlab.data.writer import split_last_tokens, write_stream

log = logging.getLogger(__name__)

# bump when the file layout or split rule changes: old caches are then ignored. 2: the byte tokenizer
# ends documents with BYTE_EOS and is stored as uint8; meta.json records sizes and checksums
FORMAT_VERSION = 2
SPLITS = ("train", "val")
_MAP_BATCH = 512  # documents per tokenizer call
_WRITE_CHUNK = 8192  # documents per write
# Below this much text a process pool costs more than it saves: on 2 cores a 64 MB corpus packed in
# 1.4 s in-process vs 1.7 s with 2 processes (byte), and BPE already runs on all cores in Rust.
PARALLEL_MIN_BYTES = 256 << 20
# The streaming packer with the byte tokenizer: a pool of 2 packed 75 MB/s against 172 MB/s in-process
# (2 GiB, 2 cores; docs/performance.md, "Packing"): shipping batches costs more than the join it spares.
STREAM_POOL_FOR_BYTES = False


@dataclass(frozen=True)
class PackedData:
    """Where the packed token files are, what is in them, and the tokenizer that made them."""

    directory: Path
    meta: dict[str, Any]
    tokenizer: Tokenizer

    def path(self, split: str) -> Path:
        """The flat token file of a split ("train" or "val")."""
        if split not in SPLITS:
            raise ValueError(f"split={split!r} is not accepted; choose one of {SPLITS}")
        return self.directory / f"{split}.bin"

    @property
    def dtype(self) -> np.dtype:
        """The token files' element type."""
        return np.dtype(self.meta["dtype"])

    def tokens(self, split: str) -> np.memmap:
        """The split's tokens, memory-mapped read-only."""
        return np.memmap(self.path(split), dtype=self.dtype, mode="r")


def token_dtype(vocab_size: int) -> np.dtype:
    """Smallest file dtype for the vocabulary: uint8 for the byte tokenizer's 256 ids (half the bytes
    to write and read), uint16 up to 65536 ids, else uint32."""
    if vocab_size > 1 << 32:
        raise ValueError(f"a vocabulary of {vocab_size} ids does not fit the widest token files (uint32)")
    if vocab_size <= 256:
        return np.dtype(np.uint8)
    return np.dtype(np.uint16 if vocab_size <= 65536 else np.uint32)


def val_period(val_fraction: float) -> int:
    """Document i goes to val iff i % val_period == 0."""
    if not isinstance(val_fraction, int | float) or not 0 < val_fraction <= 0.5:
        raise ValueError(f"data.val_fraction={val_fraction!r} must be in (0, 0.5]")
    return max(2, round(1 / val_fraction))


def val_mask(n_docs: int, val_fraction: float, groups: list[str] | None = None) -> np.ndarray:
    """Deterministic split: True where the document is held out for validation.

    Without groups, document i is val iff i % val_period == 0. With groups (one label per
    document), the same rule picks groups, numbered in order of first appearance, so every document
    of a group lands on the same side; a single group falls back to the per-document rule.
    """
    period = val_period(val_fraction)
    units = np.arange(n_docs)
    if groups is not None:
        labels = np.asarray(groups, dtype=object)
        _, first, inverse = np.unique(labels, return_index=True, return_inverse=True)
        if len(first) > 1:
            order = np.empty(len(first), dtype=np.int64)
            order[np.argsort(first)] = np.arange(len(first))  # group ordinal by first appearance
            units = order[inverse.reshape(-1)]
    mask = units % period == 0
    if n_docs and not mask.any():  # cannot happen with the rule above; kept as the contract says
        mask[-1] = True
    return mask


def packed_fingerprint(cfg: DataConfig) -> tuple[str, str]:
    """(packed-data fingerprint, source fingerprint), computed from metadata only."""
    val_period(cfg.val_fraction)
    source_fp = source_fingerprint(cfg)
    parts = {
        "format": FORMAT_VERSION,
        "source": source_fp,
        "tokenizer": tokenizer_identity(cfg, source_fp),
        "val_fraction": cfg.val_fraction,
        "max_bytes": cfg.max_bytes,
        "doc_separator": cfg.doc_separator,
        "streaming": streamed(cfg),
    }
    return stable_hash(parts), source_fp


@contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """Exclusive inter-process lock (DDP ranks, parallel sweeps) held while the block runs."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


class _Encoder:
    """Picklable batched map function: arrow text in, token lists (+EOS) and byte counts out."""

    def __init__(self, tokenizer: Tokenizer, dtype: np.dtype) -> None:
        self.tokenizer = tokenizer
        self.dtype = dtype

    def __call__(self, batch: pa.Table) -> pa.Table:
        texts = [t or "" for t in batch.column("text").to_pylist()]
        eos = self.tokenizer.eos_id
        ids = [np.asarray(x, dtype=self.dtype) for x in self.tokenizer.encode_batch(texts)]
        if eos is not None:
            tail = np.array([eos], dtype=self.dtype)
            ids = [np.concatenate([x, tail]) for x in ids]
        lengths = np.array([len(x) for x in ids], dtype=np.int64)
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        values = np.concatenate(ids) if ids else np.zeros(0, self.dtype)
        lists = pa.LargeListArray.from_arrays(pa.array(offsets), pa.array(values))
        n_bytes = pa.array([len(t.encode("utf-8")) for t in texts], type=pa.int64())
        return pa.table({"ids": lists, "n_bytes": n_bytes})


def _num_proc(cfg: DataConfig, docs: datasets.Dataset, tokenizer: Tokenizer) -> int:
    """Processes for the map: 1 unless the corpus is big and the tokenizer does real work."""
    if tokenizer.name == "byte":  # a memcpy per document: shipping it to workers costs more
        return 1
    if cfg.num_proc > 1 and docs.data.nbytes >= PARALLEL_MIN_BYTES and len(docs) >= 2 * cfg.num_proc:
        return cfg.num_proc
    return 1


def _tokenize(
    cfg: DataConfig, docs: datasets.Dataset, tokenizer: Tokenizer, scratch: Path, fp: str
) -> datasets.Dataset:
    dtype = token_dtype(tokenizer.vocab_size)
    num_proc = _num_proc(cfg, docs, tokenizer)
    log.info("tokenizing %d documents with %s (num_proc=%d)", len(docs), tokenizer.name, num_proc)
    return docs.with_format("arrow").map(
        _Encoder(tokenizer, dtype),
        batched=True,
        batch_size=_MAP_BATCH,
        num_proc=num_proc if num_proc > 1 else None,  # datasets>=4 forks a pool even for 1
        remove_columns=docs.column_names,
        cache_file_name=str(scratch / "tokens.arrow"),
        load_from_cache_file=False,
        new_fingerprint=fp,  # skips hashing the tokenizer to name the cache file
        desc="tokenizing",
    )


def _write_splits(
    tokens: datasets.Dataset, is_val: np.ndarray, out: Path, dtype: np.dtype
) -> dict[str, dict[str, int]]:
    """Stream token lists into train.bin/val.bin; returns per-split token and byte counts."""
    counts = {s: {"tokens": 0, "bytes": 0, "docs": 0} for s in SPLITS}
    table = tokens.with_format("arrow")
    with open(out / "train.bin", "wb") as ftrain, open(out / "val.bin", "wb") as fval:
        for start in range(0, len(tokens), _WRITE_CHUNK):
            chunk = table[start : start + _WRITE_CHUNK]
            lists = chunk.column("ids").combine_chunks()
            values = lists.flatten().to_numpy(zero_copy_only=False).astype(dtype, copy=False)
            lengths = pc.list_value_length(lists).to_numpy(zero_copy_only=False)
            n_bytes = chunk.column("n_bytes").to_numpy()
            doc_val = is_val[start : start + len(chunk)]
            tok_val = np.repeat(doc_val, lengths)
            for split, sel, tsel, fh in (
                ("train", ~doc_val, ~tok_val, ftrain),
                ("val", doc_val, tok_val, fval),
            ):
                fh.write(values[tsel].tobytes())
                counts[split]["tokens"] += int(tsel.sum())
                counts[split]["bytes"] += int(n_bytes[sel].sum())
                counts[split]["docs"] += int(sel.sum())
    return counts


def _split_single_document(out: Path, dtype: np.dtype, counts: dict, val_fraction: float) -> None:
    """One document cannot be split by documents: hold out its last val_fraction of tokens."""
    n_train, n_val = split_last_tokens(out, dtype, val_fraction)
    total_bytes = counts["train"]["bytes"] + counts["val"]["bytes"]
    counts["train"] = {"tokens": n_train, "bytes": 0, "docs": 0}
    counts["val"] = {"tokens": n_val, "bytes": 0, "docs": 1}
    for split in SPLITS:  # bytes are per document; apportion them by token share
        counts[split]["bytes"] = round(total_bytes * counts[split]["tokens"] / max(1, n_train + n_val))
    log.warning("the source has a single document: split by tokens instead (last %d tokens are val)", n_val)


def _texts(docs: datasets.Dataset) -> Iterator[str]:
    for batch in docs.iter(batch_size=1000):
        yield from (t or "" for t in batch["text"])


def _text_bytes(cfg: DataConfig, docs: datasets.Dataset) -> int | None:
    """The documents' UTF-8 bytes, counted from the Arrow column only when a BPE training sample
    could be smaller than them (data.bpe_train_bytes): what spreads the sample over the split."""
    budget, bound = cfg.bpe_train_bytes, source_size_bound(cfg)
    if cfg.tokenizer != "bpe" or budget is None or (bound is not None and bound <= budget):
        return None
    total = 0
    for batch in docs.with_format("arrow").iter(batch_size=10_000):
        total += pc.sum(pc.binary_length(batch.column("text"))).as_py() or 0
    return total


def _pack_dataset(cfg: DataConfig, tmp: Path, fp: str, source_fp: str) -> tuple[Tokenizer, dict, int]:
    """Load the documents as a Dataset, tokenize with datasets.map, write the splits."""
    docs = load_documents(cfg)
    if len(docs) == 0:
        raise ValueError(f"data.source={cfg.source}: the source has no documents (path={cfg.path})")
    groups = docs["group"] if "group" in docs.column_names else None
    is_val = val_mask(len(docs), cfg.val_fraction, groups)
    train_docs = docs.select(np.flatnonzero(~is_val)) if len(docs) > 1 else docs
    texts = lambda: _texts(train_docs)  # noqa: E731
    tokenizer = build_tokenizer(
        cfg, texts, source_fp, sample_fn=texts, train_bytes=lambda: _text_bytes(cfg, train_docs)
    )
    dtype = token_dtype(tokenizer.vocab_size)
    scratch = tmp / "_scratch"
    scratch.mkdir()
    tokens = _tokenize(cfg, docs, tokenizer, scratch, fp)
    counts = _write_splits(tokens, is_val, tmp, dtype)
    del tokens
    shutil.rmtree(scratch)
    return tokenizer, counts, len(docs)


def _train_texts(cfg: DataConfig) -> Iterator[str]:
    """The train documents' pieces of the stream, for BPE training (a second pass over the source)."""
    period = val_period(cfg.val_fraction)
    doc = 0
    for raws, ends in pieces(cfg):  # chunks: parallel lists of pieces and "ends its document"
        for raw, end in zip(raws, ends, strict=True):
            if doc % period:
                yield raw.decode("utf-8")
            doc += end


def _pack_stream(cfg: DataConfig, tmp: Path, source_fp: str) -> tuple[Tokenizer, dict, int]:
    """Stream the source (a text file split at data.doc_separator, or a streamed hub set) into the
    splits batch by batch: memory does not grow with the corpus."""
    texts = lambda: _train_texts(cfg)  # noqa: E731
    bound = source_size_bound(cfg)  # a text file's train documents: all but every period-th
    train_bytes = (
        None if bound is None else bound * (val_period(cfg.val_fraction) - 1) // val_period(cfg.val_fraction)
    )
    tokenizer = build_tokenizer(cfg, texts, source_fp, sample_fn=texts, train_bytes=lambda: train_bytes)
    dtype = token_dtype(tokenizer.vocab_size)
    num_proc = max(1, cfg.num_proc)
    if (
        cfg.source == "text"
        and sum(f.stat().st_size for f in resolve_files(cfg.path or "")) < PARALLEL_MIN_BYTES
    ):
        num_proc = 1  # starting a spawned pool costs seconds: only worth it for big files
    if tokenizer.name == "byte" and not STREAM_POOL_FOR_BYTES:
        num_proc = 1
    log.info("packing a stream of documents with %s (num_proc=%d)", tokenizer.name, num_proc)
    counts = write_stream(pieces(cfg), tokenizer, dtype, tmp, val_period(cfg.val_fraction), num_proc)
    return tokenizer, counts, counts["train"]["docs"] + counts["val"]["docs"]


def _build(cfg: DataConfig, out: Path, fp: str, source_fp: str) -> None:
    t0 = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix=f".{fp}.", dir=out.parent))
    try:
        if streamed(cfg):
            tokenizer, counts, n_docs = _pack_stream(cfg, tmp, source_fp)
        else:
            tokenizer, counts, n_docs = _pack_dataset(cfg, tmp, fp, source_fp)
        dtype = token_dtype(tokenizer.vocab_size)
        if counts["train"]["bytes"] + counts["val"]["bytes"] == 0:  # end-of-text ids alone are no text
            raise ValueError(
                f"data.source={cfg.source}: the documents hold no text (0 tokens; path={cfg.path}); "
                "accepted: non-empty UTF-8 text"
            )
        split_mode = "documents"
        if n_docs == 1:
            _split_single_document(tmp, dtype, counts, cfg.val_fraction)
            split_mode = "tokens"
        t1 = time.perf_counter()
        tokenizer.save(tmp)
        meta = {
            "format": FORMAT_VERSION,
            "fingerprint": fp,
            "source_fingerprint": source_fp,
            "source": cfg.source,
            "tokenizer": tokenizer.name,
            "vocab_size": tokenizer.vocab_size,
            "eos_id": tokenizer.eos_id,
            "dtype": dtype.name,
            "split_mode": split_mode,
            "val_fraction": cfg.val_fraction,
            "max_bytes": cfg.max_bytes,
            "doc_separator": cfg.doc_separator,
            "n_docs": {s: counts[s]["docs"] for s in SPLITS},
            "n_tokens": {s: counts[s]["tokens"] for s in SPLITS},
            "n_bytes": {s: counts[s]["bytes"] for s in SPLITS},
            "bytes_per_token": counts["val"]["bytes"] / max(1, counts["val"]["tokens"]),
            "pack_seconds": round(t1 - t0, 3),
            "files": {f"{s}.bin": integrity.describe(tmp / f"{s}.bin") for s in SPLITS},
        }
        integrity.record_verified(tmp, list(meta["files"]))  # their full CRC was just computed
        (tmp / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")  # last: marks it finished
        if out.exists():  # a damaged or unfinished entry (checked under the lock): replace it
            shutil.rmtree(out)
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    log.info(
        "packed %d train / %d val tokens (%s) in %.1fs at %s",
        meta["n_tokens"]["train"],
        meta["n_tokens"]["val"],
        tokenizer.name,
        t1 - t0,
        out,
    )


def _trusted_meta(out: Path, say: bool) -> dict[str, Any] | None:
    """meta.json of a finished cache entry whose files match it (sizes, sampled checksum; the full
    checksum once per new version of a file, see integrity.unverified_problem), else None; with say,
    one warning line naming what is wrong."""
    meta_file = out / "meta.json"
    if not meta_file.is_file():
        return None
    try:
        meta = json.loads(meta_file.read_text())
        why = integrity.problem(out, meta["files"]) or integrity.unverified_problem(out, meta["files"])
    except (ValueError, KeyError, TypeError) as e:
        why = f"meta.json is unreadable ({type(e).__name__})"
    if why is None:
        return meta
    if say:
        log.warning("cached tokens at %s are damaged (%s): packing them again", out, why)
    return None


def _remove_unfinished(root: Path, fp: str) -> None:
    """Scratch directories of packings that never finished (a killed run): never trusted, removed.
    Called under the entry's lock, so no live packer of this fingerprint owns one."""
    for leftover in sorted(root.glob(f".{fp}.*")):
        log.warning("found an unfinished packing at %s (a run killed while packing?): removing it", leftover)
        shutil.rmtree(leftover, ignore_errors=True)


@contextmanager
def sigterm_raises() -> Iterator[None]:
    """While packing, SIGTERM raises Lightning's SIGTERMException instead of killing the process, so
    the unfinished scratch directory is removed and the app records the run as preempted.
    Only in the main thread, and only where nobody else has installed a SIGTERM handler."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        # imported here: lightning costs ~0.5 GB and seconds to import, and the app has it loaded
        from lightning.pytorch.utilities.exceptions import SIGTERMException

        raise SIGTERMException

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def prepare_tokens(cfg: DataConfig) -> PackedData:
    """Tokenize and pack the corpus unless an identical packing is cached and intact; safe across
    processes (one packs, the others wait on the lock) and against a packer killed midway."""
    fp, source_fp = packed_fingerprint(cfg)
    root = resolve_path(cfg.cache_dir)
    out = root / fp
    meta = _trusted_meta(out, say=False)
    if meta is None:
        with file_lock(root / f"{fp}.lock"):
            meta = _trusted_meta(out, say=True)  # another process may have packed it while we waited
            if meta is None:
                _remove_unfinished(root, fp)
                with sigterm_raises():
                    _build(cfg, out, fp, source_fp)
                meta = json.loads((out / "meta.json").read_text())
                return PackedData(directory=out, meta=meta, tokenizer=load_tokenizer(out))
    log.info("using cached tokens at %s", out)
    return PackedData(directory=out, meta=meta, tokenizer=load_tokenizer(out))
