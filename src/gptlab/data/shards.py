"""Pre-tokenized `.bin` shards read in place (data.source=tokens): nothing is copied or cached.

Two layouts are read. Raw files (nanoGPT's train.bin) are a flat array of `data.token_dtype`.
llm.c's and modded-nanogpt's shards start with 256 little-endian int32: magic 20240520, a version
(1: uint16 tokens, 2: uint32) and the token count, then the tokens; the header is recognised by its
magic and its count checked against the file size, so a truncated download fails at start-up.

Checks at start-up, before the Trainer is built, each a one-line ValueError naming the shard:
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
import json
import logging
import math
import os
import pickle
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from gptlab.data.config import TOKEN_DTYPES, DataConfig
from gptlab.data.paths import stable_hash
from gptlab.data.plan import ShardsPlan
from gptlab.data.resolve import resolve_shards
from gptlab.data.splits import val_mask
from gptlab.data.tokenizers import IdTokenizer, PretrainedTokenizer, Tokenizer

log = logging.getLogger(__name__)

MAGIC = 20240520
HEADER_INTS = 256
HEADER_BYTES = HEADER_INTS * 4
VERSION_DTYPES = {1: np.dtype(np.uint16), 2: np.dtype(np.uint32)}
CHECK_TOKENS = 1 << 16  # tokens read at each of a shard's start, middle and end (dtype tell, bpb)
SCAN_TOKENS = 1 << 24  # tokens per chunk of the full max-id scan (32 MiB of uint16)
SCAN_DIR = "shard_scans"  # under data.cache_dir: one JSON record of each scanned shard's largest id
META_PKL = "meta.pkl"  # nanoGPT's prepare.py writes the vocabulary next to its raw train.bin/val.bin


@dataclass(frozen=True)
class Shard:
    """One token file: where its tokens start (bytes), their type and count, and its layout."""

    path: Path
    offset: int
    dtype: np.dtype
    n_tokens: int
    headered: bool

    def layout(self) -> str:
        """'llm.c header, uint16' or 'raw uint32': what mixed-format errors print."""
        return f"{'llm.c header' if self.headered else 'raw'} {self.dtype.name}"

    def memmap(self) -> np.memmap:
        """The shard's tokens, memory-mapped read-only (the header skipped)."""
        return np.memmap(self.path, dtype=self.dtype, mode="r", offset=self.offset, shape=(self.n_tokens,))


def _dtype(token_dtype: str | None) -> np.dtype | None:
    if token_dtype is None:
        return None
    if token_dtype not in TOKEN_DTYPES:
        raise ValueError(f"data.token_dtype={token_dtype!r} is not accepted; choose one of {TOKEN_DTYPES}")
    return np.dtype(token_dtype)


def read_shard(path: Path, token_dtype: str | None) -> Shard:
    """The shard's layout from its first 1 KiB and its size; one-line errors naming file and field."""
    size = path.stat().st_size
    head = np.fromfile(path, dtype="<i4", count=min(HEADER_INTS, size // 4))
    want = _dtype(token_dtype)
    if size >= HEADER_BYTES and int(head[0]) == MAGIC:
        version, count = int(head[1]), int(head[2])
        if version not in VERSION_DTYPES:
            raise ValueError(
                f"data.path: {path} has llm.c's magic but header version {version}; "
                f"accepted: {', '.join(f'{v} ({d.name})' for v, d in VERSION_DTYPES.items())}"
            )
        dtype = VERSION_DTYPES[version]
        if want is not None and want != dtype:
            raise ValueError(
                f"data.token_dtype={token_dtype} disagrees with {path}, whose header (version "
                f"{version}) says {dtype.name}; drop data.token_dtype or set it to {dtype.name}"
            )
        expected = HEADER_BYTES + count * dtype.itemsize
        if size != expected:
            raise ValueError(
                f"data.path: {path} header says {count} tokens ({expected} bytes) but the file has "
                f"{size} bytes: truncated or damaged"
            )
        if count == 0:
            raise ValueError(
                f"data.path: {path} holds no tokens (its llm.c header says 0); accepted: shards "
                "with at least one token (remove the empty shard from the pattern)"
            )
        return Shard(path, HEADER_BYTES, dtype, count, True)
    if size >= HEADER_BYTES and int(head[1]) in VERSION_DTYPES:
        itemsize = VERSION_DTYPES[int(head[1])].itemsize
        if HEADER_BYTES + int(head[2]) * itemsize == size:  # a header in all but its magic
            raise ValueError(
                f"data.path: {path} looks like an llm.c shard (version and count fit its size) but "
                f"its magic is {int(head[0])}, not {MAGIC}: damaged header"
            )
    if size == 0:
        raise ValueError(
            f"data.path: {path} is empty (0 bytes, no tokens); accepted: shards with at least one "
            "token (remove the empty shard from the pattern)"
        )
    meta_vocab = nanogpt_vocab(path)
    if want is None:
        hint = f"; {path.parent / META_PKL} says vocab_size={meta_vocab}: use " if meta_vocab else ""
        hint += f"data.token_dtype={_holds(meta_vocab).name}" if meta_vocab else ""
        raise ValueError(
            f"data.token_dtype is required: {path} has no llm.c header (magic {MAGIC}), so it is read "
            f"as raw tokens; accepted: {', '.join(TOKEN_DTYPES)}{hint}"
        )
    if size % want.itemsize:
        raise ValueError(
            f"data.path: {path} has {size} bytes, not a whole number of data.token_dtype={token_dtype} "
            f"tokens ({want.itemsize} bytes each)"
        )
    if meta_vocab is not None and _holds(meta_vocab) != want:
        raise ValueError(
            f"data.token_dtype={token_dtype} disagrees with {path.parent / META_PKL}, whose "
            f"vocab_size={meta_vocab} is stored as {_holds(meta_vocab).name} (nanoGPT's prepare.py); "
            f"set data.token_dtype={_holds(meta_vocab).name}"
        )
    shard = Shard(path, 0, want, size // want.itemsize, False)
    if want == np.uint16 and (tell := _uint32_tell(shard)):
        raise ValueError(
            f"data.path: {path} read as data.token_dtype=uint16 looks like uint32 tokens: {tell}; "
            "set data.token_dtype=uint32"
        )
    return shard


def _holds(vocab_size: int) -> np.dtype:
    """The raw dtype nanoGPT-style files use for a vocabulary: uint16 up to 65536 ids, else uint32."""
    return np.dtype(np.uint16 if vocab_size <= 1 << 16 else np.uint32)


class _DataOnly(pickle.Unpickler):
    """Loads plain containers, numbers and strings only: a meta.pkl never runs code."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"{module}.{name} is not loaded from a meta.pkl")


def nanogpt_vocab(path: Path) -> int | None:
    """vocab_size from nanoGPT's meta.pkl next to a raw shard, or None (absent, or not readable as
    plain data: then a warning)."""
    meta_file = path.parent / META_PKL
    if not meta_file.is_file():
        return None
    try:
        with open(meta_file, "rb") as fh:
            meta = _DataOnly(fh).load()
        vocab = meta["vocab_size"]
        if isinstance(vocab, bool) or not isinstance(vocab, int) or vocab < 1:
            raise TypeError(f"vocab_size={vocab!r}")
    except (pickle.UnpicklingError, EOFError, KeyError, TypeError, ValueError, AttributeError) as e:
        log.warning("%s is not nanoGPT's meta.pkl (%s): ignored", meta_file, e)
        return None
    return vocab


def _uint32_tell(shard: Shard) -> str | None:
    """Why a raw file read as uint16 looks like uint32 ids, or None. Little-endian uint32 ids read as
    uint16 put each id's high half at every odd position: 0 for ids below 65536, and at most a few
    values for any real vocabulary, while the low halves at even positions vary. Token streams have
    the same ids at odd and even positions, so a real uint16 file never shows this."""
    blocks = []
    tokens = shard.memmap()
    n = len(tokens) - len(tokens) % 2
    for a in sorted({0, max(0, n // 2 - CHECK_TOKENS // 2) & ~1, max(0, n - CHECK_TOKENS) & ~1}):
        blocks.append(np.asarray(tokens[a : min(n, a + CHECK_TOKENS)]))
    sample = np.concatenate(blocks)
    sample = sample[: len(sample) - len(sample) % 2]
    if len(sample) < 512:  # too few pairs to tell
        return None
    odd, even = np.unique(sample[1::2]), np.unique(sample[0::2])
    if len(odd) <= 4 and len(even) >= 64:
        values = ", ".join(str(int(v)) for v in odd)
        return (
            f"every odd uint16 of {len(sample)} sampled is in {{{values}}} (the high halves of "
            f"uint32 ids) while the even ones take {len(even)} values"
        )
    return None


def scan_max(shard: Shard) -> tuple[int, int]:
    """(largest id, token offset of its first occurrence) over every token of the shard: numpy over the
    memmap in SCAN_TOKENS chunks (bounded memory, read at the page cache's or the disk's speed)."""
    tokens = shard.memmap()
    best, at = -1, 0
    for start in range(0, len(tokens), SCAN_TOKENS):
        block = tokens[start : start + SCAN_TOKENS]
        top = int(block.max())
        if top > best:  # strictly: the first occurrence is kept
            best, at = top, start + int(np.argmax(block))
    return best, at


def _scan_record(shard: Shard) -> tuple[Path, dict[str, Any]]:
    """Where a shard's scan is cached (relative to the cache root) and what identifies it."""
    st = shard.path.stat()
    key = {
        "path": str(shard.path.resolve()),
        "offset": shard.offset,
        "dtype": shard.dtype.name,
        "bytes": st.st_size,
        "mtime_ns": st.st_mtime_ns,
    }
    name = stable_hash({k: key[k] for k in ("path", "offset", "dtype")})
    return Path(SCAN_DIR) / f"{name}.json", key


def max_id(shard: Shard, cache_root: Path | None) -> tuple[int, int]:
    """scan_max, read from `<cache_root>/shard_scans/` when this shard (path, layout, size, mtime) was
    scanned before; a new scan is written there (atomically; an unwritable cache only logs)."""
    if cache_root is None:
        return scan_max(shard)
    rel, key = _scan_record(shard)
    record_file = cache_root / rel
    try:
        record = json.loads(record_file.read_text())
        if {k: record.get(k) for k in key} == key:
            return int(record["max_id"]), int(record["max_at"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    top, at = scan_max(shard)
    try:
        record_file.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{record_file.name}.", dir=record_file.parent)
        with os.fdopen(fd, "w") as fh:
            json.dump({**key, "max_id": top, "max_at": at}, fh)
        os.replace(tmp, record_file)
    except OSError as e:
        log.warning("could not cache the id scan of %s in %s (%s)", shard.path, record_file.parent, e)
    return top, at


def check_ids(shard: Shard, vocab_size: int, what: str, cache_root: Path | None = None) -> None:
    """Refuse a shard holding any id >= vocab_size: every token is scanned (once per shard version,
    see max_id); the error names the largest id and where it first occurs."""
    top, at = max_id(shard, cache_root)
    if top >= vocab_size:
        hint = ""
        if not shard.headered and shard.dtype == np.uint32:
            halves = np.asarray(shard.memmap()[:CHECK_TOKENS]).view("<u2")
            if halves.size and int(halves.max()) < vocab_size:
                hint = "; read as uint16 its first tokens all fit: a uint16 file? set data.token_dtype=uint16"
        raise ValueError(
            f"data.path: {shard.path} holds id {top} at token offset {at}, not below the vocabulary "
            f"size {vocab_size} ({what}): the shard was tokenized with another vocabulary{hint}"
        )


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


def _scanned(shard: Shard, cache_root: Path) -> bool:
    rel, key = _scan_record(shard)
    try:
        record = json.loads((cache_root / rel).read_text())
    except (OSError, ValueError):
        return False
    return isinstance(record, dict) and {k: record.get(k) for k in key} == key


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
    new = [s for s in train + val if not _scanned(s, cache_root)]
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
