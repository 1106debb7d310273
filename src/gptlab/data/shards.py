"""Pre-tokenized `.bin` shards read in place (data.source=tokens): nothing is copied or cached.

Two layouts are read. Raw files (nanoGPT's train.bin) are a flat array of `data.token_dtype`.
llm.c's and modded-nanogpt's shards start with 256 little-endian int32: magic 20240520, a version
(1: uint16 tokens, 2: uint32) and the token count, then the tokens; the header is recognised by its
magic and its count checked against the file size, so a truncated download fails at start-up.

Checks at start-up, before the Trainer is built, each a one-line ValueError naming the shard (layouts
and their checks: shard_format.py; the id scan: shard_scan.py):
- a shard with no tokens (a 0-byte raw file, an llm.c header with count 0);
- raw files: the size must divide by the dtype's itemsize; nanoGPT's `meta.pkl` next to the shard,
  when present, names the vocabulary and so the dtype (<= 65536 ids: uint16, else uint32); and a
  uint32 file read as uint16 is recognised by its odd halves (high halves of the ids: all 0 for ids
  below 65536, a handful of values at most) against varied even ones, in a sample;
- every id of every shard below the vocabulary: the largest id is found by a chunked scan of the whole
  memmap, once, and cached in `<data.cache_dir>/shard_scans/` keyed by the shard's path, layout, size
  and mtime, so the next run reads one small JSON file per shard instead.
"""

from __future__ import annotations

import bisect
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from gptlab.data.config import DataConfig
from gptlab.data.paths import stable_hash
from gptlab.data.plan import ShardsPlan
from gptlab.data.resolve import resolve_shards
from gptlab.data.shard_format import CHECK_TOKENS, Shard, read_shard
from gptlab.data.shard_scan import SCAN_DIR, check_ids, scanned
from gptlab.data.splits import val_mask
from gptlab.data.tokenizers import IdTokenizer, PretrainedTokenizer, Tokenizer

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Segment:
    """Tokens [start, stop) of one shard."""

    shard: Shard
    start: int
    stop: int


class ShardedTokens:
    """Segments of shards as one read-only token sequence; slices may span shards (no copy until read)."""

    def __init__(self, segments: list[Segment]) -> None:
        self.segments = segments
        self._maps = [s.shard.memmap() for s in segments]
        lengths = [s.stop - s.start for s in segments]
        self._ends = list(np.cumsum(lengths, dtype=np.int64)) if lengths else []
        self.dtype = segments[0].shard.dtype if segments else np.dtype(np.uint16)

    def __len__(self) -> int:
        return int(self._ends[-1]) if self._ends else 0

    def __getitem__(self, key: slice) -> np.ndarray:
        if not isinstance(key, slice) or key.step not in (None, 1):
            raise TypeError("ShardedTokens supports contiguous slices only")
        start, stop, _ = key.indices(len(self))
        parts = []
        i = bisect.bisect_right(self._ends, start)
        while start < stop and i < len(self.segments):
            seg_begin = int(self._ends[i - 1]) if i else 0
            seg = self.segments[i]
            lo = seg.start + start - seg_begin
            hi = seg.start + min(stop, int(self._ends[i])) - seg_begin
            parts.append(np.asarray(self._maps[i][lo:hi]))
            start += hi - lo
            i += 1
        if not parts:
            return np.zeros(0, self.dtype)
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        arr = self[:]
        return arr.astype(dtype) if dtype is not None else arr

    def __getstate__(self) -> dict[str, Any]:
        return {"segments": self.segments}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["segments"])  # type: ignore[misc]


@dataclass(frozen=True)
class ShardedData:
    """The PackedData of data.source=tokens: splits are segments of the user's shards."""

    directory: Path
    meta: dict[str, Any]
    tokenizer: Tokenizer
    splits: dict[str, list[Segment]] = field(repr=False)

    @property
    def dtype(self) -> np.dtype:
        """The shards' element type."""
        return np.dtype(self.meta["dtype"])

    def tokens(self, split: str) -> ShardedTokens:
        """The split's tokens, memory-mapped read-only."""
        return ShardedTokens(self.splits[split])


def _one_layout(shards: list[Shard]) -> None:
    first = shards[0]
    for s in shards[1:]:
        if (s.headered, s.dtype) != (first.headered, first.dtype):
            raise ValueError(
                f"data.path: mixed shard formats: {first.path} is {first.layout()} but {s.path} is "
                f"{s.layout()}; accepted: one layout for all shards (train and val)"
            )


def shard_tokenizer(
    vocab_size: int | None, tokenizer_path: str | None, tokenizer_file: Path | None
) -> tuple[Tokenizer, int, str]:
    """(tokenizer, vocabulary bound for the id check, where the bound came from), from data.vocab_size
    and data.tokenizer_path (as written, and resolved to its tokenizer.json)."""
    if vocab_size is not None and vocab_size < 1:
        raise ValueError(f"data.vocab_size={vocab_size!r} must be a positive integer or null")
    if tokenizer_file is not None:
        tok: Tokenizer = PretrainedTokenizer(tokenizer_file)
        if vocab_size is not None and vocab_size < tok.vocab_size:
            raise ValueError(
                f"data.vocab_size={vocab_size} is smaller than the {tok.vocab_size} ids of "
                f"data.tokenizer_path={tokenizer_path}; accepted: null or >= {tok.vocab_size}"
            )
        if vocab_size is None:
            return tok, tok.vocab_size, f"the vocabulary of data.tokenizer_path={tokenizer_path}"
        return tok, vocab_size, f"data.vocab_size={vocab_size}"
    if vocab_size is None:
        raise ValueError(
            "data.vocab_size or data.tokenizer_path is required for data.source=tokens "
            "(e.g. data.vocab_size=50257, or a GPT-2 tokenizer.json)"
        )
    return IdTokenizer.of_size(vocab_size), vocab_size, f"data.vocab_size={vocab_size}"


def _split(val_fraction: float, train: list[Shard], val: list[Shard]) -> tuple[dict[str, list[Segment]], str]:
    """Segments per split: the val shards; else every round(1/val_fraction)-th shard (shard 0 first);
    a single shard keeps its last val_fraction of tokens for val."""
    whole = [Segment(s, 0, s.n_tokens) for s in train]
    if val:
        return {"train": whole, "val": [Segment(s, 0, s.n_tokens) for s in val]}, "val_path"
    if len(train) == 1:
        s = train[0]
        n_val = max(1, round(s.n_tokens * val_fraction))
        return {
            "train": [Segment(s, 0, s.n_tokens - n_val)],
            "val": [Segment(s, s.n_tokens - n_val, s.n_tokens)],
        }, "tokens"
    mask = val_mask(len(train), val_fraction)
    splits = {
        "train": [seg for seg, v in zip(whole, mask, strict=True) if not v],
        "val": [seg for seg, v in zip(whole, mask, strict=True) if v],
    }
    return splits, "shards"


def _bytes_per_token(tokenizer: Tokenizer, tokens: ShardedTokens) -> float:
    """Estimated from a decoded sample of val; NaN (val/bpb unknown) without a real tokenizer."""
    if isinstance(tokenizer, IdTokenizer) or len(tokens) == 0:
        return math.nan
    sample = tokens[: min(len(tokens), CHECK_TOKENS)]
    return len(tokenizer.decode(sample.tolist()).encode("utf-8")) / max(1, len(sample))


def open_shards(cfg: DataConfig) -> ShardedData:
    """The data config of pre-tokenized shards resolved (data.plan), then opened: the entry point."""
    return read_shards(resolve_shards(cfg))


def read_shards(plan: ShardsPlan) -> ShardedData:
    """Read, check and split the planned shards of data.path (and data.val_path); writes nothing."""
    val = [read_shard(f, plan.token_dtype) for f in plan.val_files]
    train = [read_shard(f, plan.token_dtype) for f in plan.train_files]
    if not train:
        raise ValueError(
            f"data.path={plan.path!r}: every matched shard is also in data.val_path; no train shards left"
        )
    _one_layout(train + val)
    tokenizer, vocab, what = shard_tokenizer(plan.vocab_size, plan.tokenizer_path, plan.tokenizer_file)
    cache_root = plan.cache_root
    new = [s for s in train + val if not scanned(s, cache_root)]
    if new:
        log.info(
            "scanning %d shard(s) (%.1f MB) for their largest id, once: recorded in %s",
            len(new),
            sum(s.path.stat().st_size for s in new) / 1e6,
            cache_root / SCAN_DIR,
        )
    for shard in train + val:
        check_ids(shard, vocab, what, cache_root)
    splits, mode = _split(plan.val_fraction, train, val)
    n_tokens = {k: sum(s.stop - s.start for s in segs) for k, segs in splits.items()}
    files = [(str(s.path), s.path.stat().st_size, s.path.stat().st_mtime_ns) for s in train + val]
    meta: dict[str, Any] = {
        "source": "tokens",
        "fingerprint": stable_hash(
            {"files": files, "mode": mode, "val_fraction": plan.val_fraction, "vocab": vocab}
        ),
        "tokenizer": tokenizer.name,
        "vocab_size": max(vocab, tokenizer.vocab_size),
        "eos_id": tokenizer.eos_id,
        "dtype": train[0].dtype.name,
        "layout": train[0].layout(),
        "split_mode": mode,
        "n_shards": {k: len(segs) for k, segs in splits.items()},
        "n_tokens": n_tokens,
    }
    data = ShardedData(train[0].path.parent, meta, tokenizer, splits)
    meta["bytes_per_token"] = _bytes_per_token(tokenizer, data.tokens("val"))
    log.info(
        "data.source=tokens: %d train / %d val tokens in %d shard(s) (%s), split by %s",
        n_tokens["train"],
        n_tokens["val"],
        len(train) + len(val),
        meta["layout"],
        mode,
    )
    return data
