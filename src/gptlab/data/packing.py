"""Packing, the third stage: tokenize the documents once into flat train/val token files, cached by
the plan's key and shared safely (data.cache).

Two packers: documents loaded as a `datasets.Dataset` and tokenized with `datasets.map`, or, for
data.doc_separator and data.streaming, a stream of pieces packed batch by batch in bounded memory
(writer). Cache location: `data.cache_dir`, resolved once by `data.plan`: an absolute path is used as
is; a relative one is taken against the original working directory (Hydra's when Hydra is
initialised, else the process's cwd). Layout:
`<cache_dir>/<key>/{train.bin,val.bin,meta.json,verified.json,tokenizer.json,tokenizer_config.json}`.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from gptlab.data import integrity, sources
from gptlab.data.cache import SPLITS, PackedData, file_lock, remove_unfinished, sigterm_raises, trusted_meta
from gptlab.data.config import DataConfig
from gptlab.data.plan import FORMAT_VERSION, DataPlan, SourcePlan
from gptlab.data.resolve import resolve
from gptlab.data.sources.stream import pieces
from gptlab.data.splits import token_dtype, val_mask, val_period
from gptlab.data.tokenizers import Tokenizer, build_tokenizer, load_tokenizer
from gptlab.data.writer import split_last_tokens, write_stream

if TYPE_CHECKING:  # annotations only: documents come from sources.load_documents, on a cache miss
    import datasets
    import pyarrow as pa

__all__ = ["PackedData", "prepare_tokens", "pack", "token_dtype", "val_mask", "val_period"]

log = logging.getLogger(__name__)

_MAP_BATCH = 512  # documents per tokenizer call
_WRITE_CHUNK = 8192  # documents per write
# datasets.map's pool (the non-streaming packer): below this much text it costs more than it saves:
# on 2 cores a 64 MB corpus packed in 1.4 s in-process vs 1.7 s with 2 processes (byte).
PARALLEL_MIN_BYTES = 256 << 20
# The streaming packer's pool of data.num_proc processes: off, because on the machine measured it was
# never faster than one process, at any size (docs/performance.md, "Where processes pay"). byte: 64-75
# against 159-172 MB/s in-process (2 GiB, 512 MiB): shipping batches costs more than the join it
# spares. BPE through tiktoken, whose encoder already spreads a batch over a thread per core: 11.6 vs
# 11.6 MB per CPU-second at 512 MiB, 9.7 vs 12.5 at 128 MiB, 6.5 vs 11.8 at 32 MiB (2 processes vs 1):
# the pool's start (a spawned interpreter each) and shipping batches only shrink towards nothing as the
# corpus grows, while the cores it would add are the ones the threads use already.
STREAM_POOL = False


class _Encoder:
    """Picklable batched map function: arrow text in, token lists (+EOS) and byte counts out."""

    def __init__(self, tokenizer: Tokenizer, dtype: np.dtype) -> None:
        self.tokenizer = tokenizer
        self.dtype = dtype

    def __call__(self, batch: pa.Table) -> pa.Table:
        import pyarrow as pa  # packing only: a run on cached tokens never imports pyarrow

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


def _num_proc(plan: DataPlan, docs: datasets.Dataset, tokenizer: Tokenizer) -> int:
    """Processes for the map: 1 unless the corpus is big and the tokenizer does real work."""
    if tokenizer.name == "byte":  # a memcpy per document: shipping it to workers costs more
        return 1
    if plan.num_proc > 1 and docs.data.nbytes >= PARALLEL_MIN_BYTES and len(docs) >= 2 * plan.num_proc:
        return plan.num_proc
    return 1


def _tokenize(
    plan: DataPlan, docs: datasets.Dataset, tokenizer: Tokenizer, scratch: Path
) -> datasets.Dataset:
    dtype = token_dtype(tokenizer.vocab_size)
    num_proc = _num_proc(plan, docs, tokenizer)
    log.info("tokenizing %d documents with %s (num_proc=%d)", len(docs), tokenizer.name, num_proc)
    return docs.with_format("arrow").map(
        _Encoder(tokenizer, dtype),
        batched=True,
        batch_size=_MAP_BATCH,
        num_proc=num_proc if num_proc > 1 else None,  # datasets>=4 forks a pool even for 1
        remove_columns=docs.column_names,
        cache_file_name=str(scratch / "tokens.arrow"),
        load_from_cache_file=False,
        new_fingerprint=plan.key,  # skips hashing the tokenizer to name the cache file
        desc="tokenizing",
    )


def _write_splits(
    tokens: datasets.Dataset, is_val: np.ndarray, out: Path, dtype: np.dtype
) -> dict[str, dict[str, int]]:
    """Stream token lists into train.bin/val.bin; returns per-split token and byte counts."""
    import pyarrow.compute as pc

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


def _text_bytes(plan: DataPlan, docs: datasets.Dataset) -> int | None:
    """The documents' UTF-8 bytes, counted from the Arrow column only when a BPE training sample
    could be smaller than them (data.bpe_train_bytes): what spreads the sample over the split."""
    budget, bound = plan.tokenizer.bpe_train_bytes, plan.source.size_bound
    if plan.tokenizer.kind != "bpe" or budget is None or (bound is not None and bound <= budget):
        return None
    import pyarrow.compute as pc

    total = 0
    for batch in docs.with_format("arrow").iter(batch_size=10_000):
        total += pc.sum(pc.binary_length(batch.column("text"))).as_py() or 0
    return total


def _pack_dataset(plan: DataPlan, tmp: Path) -> tuple[Tokenizer, dict, int]:
    """Load the documents as a Dataset, tokenize with datasets.map, write the splits."""
    docs = sources.load_documents(plan.source)  # imports datasets: a cached run never gets here
    if len(docs) == 0:
        raise ValueError(
            f"data.source={plan.source.kind}: the source has no documents (path={plan.source.path})"
        )
    groups = docs["group"] if "group" in docs.column_names else None
    is_val = val_mask(len(docs), plan.val_fraction, groups)
    train_docs = docs.select(np.flatnonzero(~is_val)) if len(docs) > 1 else docs
    texts = lambda: _texts(train_docs)  # noqa: E731
    tokenizer = build_tokenizer(
        plan.tokenizer, texts, sample_fn=texts, train_bytes=lambda: _text_bytes(plan, train_docs)
    )
    dtype = token_dtype(tokenizer.vocab_size)
    scratch = tmp / "_scratch"
    scratch.mkdir()
    tokens = _tokenize(plan, docs, tokenizer, scratch)
    counts = _write_splits(tokens, is_val, tmp, dtype)
    del tokens
    shutil.rmtree(scratch)
    return tokenizer, counts, len(docs)


def _train_texts(src: SourcePlan, period: int) -> Iterator[str]:
    """The train documents' pieces of the stream, for BPE training (a second pass over the source)."""
    doc = 0
    for raws, ends in pieces(src):  # chunks: parallel lists of pieces and "ends its document"
        for raw, end in zip(raws, ends, strict=True):
            if doc % period:
                yield raw.decode("utf-8")
            doc += end


def _stream_procs(plan: DataPlan) -> int:
    """Processes for the streaming packer: 1 (see STREAM_POOL: the faster on every size measured),
    else data.num_proc for a text file over PARALLEL_MIN_BYTES or a streamed hub set."""
    if not STREAM_POOL:
        return 1
    if plan.source.kind == "text" and sum(f.stat().st_size for f in plan.source.files) < PARALLEL_MIN_BYTES:
        return 1  # starting a spawned pool costs seconds: only worth it for big files
    return plan.num_proc


def _pack_stream(plan: DataPlan, tmp: Path) -> tuple[Tokenizer, dict, int]:
    """Stream the source (a text file split at data.doc_separator, or a streamed hub set) into the
    splits batch by batch: memory does not grow with the corpus."""
    period = plan.val_period
    texts = lambda: _train_texts(plan.source, period)  # noqa: E731
    bound = plan.source.size_bound  # a text file's train documents: all but every period-th
    train_bytes = None if bound is None else bound * (period - 1) // period
    tokenizer = build_tokenizer(plan.tokenizer, texts, sample_fn=texts, train_bytes=lambda: train_bytes)
    dtype = token_dtype(tokenizer.vocab_size)
    num_proc = _stream_procs(plan)
    log.info("packing a stream of documents with %s (num_proc=%d)", tokenizer.name, num_proc)
    counts = write_stream(pieces(plan.source), tokenizer, dtype, tmp, period, num_proc)
    return tokenizer, counts, counts["train"]["docs"] + counts["val"]["docs"]


def _build(plan: DataPlan) -> None:
    t0 = time.perf_counter()
    out, src = plan.entry, plan.source
    tmp = Path(tempfile.mkdtemp(prefix=f".{plan.key}.", dir=out.parent))
    try:
        if src.streamed:
            tokenizer, counts, n_docs = _pack_stream(plan, tmp)
        else:
            tokenizer, counts, n_docs = _pack_dataset(plan, tmp)
        dtype = token_dtype(tokenizer.vocab_size)
        if counts["train"]["bytes"] + counts["val"]["bytes"] == 0:  # end-of-text ids alone are no text
            raise ValueError(
                f"data.source={src.kind}: the documents hold no text (0 tokens; path={src.path}); "
                "accepted: non-empty UTF-8 text"
            )
        split_mode = "documents"
        if n_docs == 1:
            _split_single_document(tmp, dtype, counts, plan.val_fraction)
            split_mode = "tokens"
        t1 = time.perf_counter()
        tokenizer.save(tmp)
        meta = {
            "format": FORMAT_VERSION,
            "fingerprint": plan.key,
            "source_fingerprint": src.fingerprint,
            "source": src.kind,
            "tokenizer": tokenizer.name,
            "vocab_size": tokenizer.vocab_size,
            "eos_id": tokenizer.eos_id,
            "dtype": dtype.name,
            "split_mode": split_mode,
            "val_fraction": plan.val_fraction,
            "max_bytes": src.max_bytes,
            "doc_separator": src.doc_separator,
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


def pack(plan: DataPlan) -> PackedData:
    """Tokenize and pack the planned corpus unless an identical packing is cached and intact; safe
    across processes (one packs, the others wait on the lock) and against a packer killed midway."""
    out = plan.entry
    meta = trusted_meta(out, say=False)
    if meta is None:
        with file_lock(plan.cache_root / f"{plan.key}.lock"):
            meta = trusted_meta(out, say=True)  # another process may have packed it while we waited
            if meta is None:
                remove_unfinished(plan.cache_root, plan.key)
                with sigterm_raises():
                    _build(plan)
                meta = json.loads((out / "meta.json").read_text())
                return PackedData(directory=out, meta=meta, tokenizer=load_tokenizer(out))
    log.info("using cached tokens at %s", out)
    return PackedData(directory=out, meta=meta, tokenizer=load_tokenizer(out))


def prepare_tokens(cfg: DataConfig) -> PackedData:
    """The data config resolved (data.plan), then packed: the entry point for one config."""
    return pack(resolve(cfg))
