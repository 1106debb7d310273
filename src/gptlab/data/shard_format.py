"""The two shard layouts and their start-up checks: llm.c's and modded-nanogpt's 256-int32 header
(magic, version, count), or a raw array of data.token_dtype (nanoGPT's train.bin, its meta.pkl read as
plain data); a uint32 file read as uint16 is told by its odd halves. See shards.py for the contract."""

from __future__ import annotations

import logging
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gptlab.data.config import TOKEN_DTYPES

log = logging.getLogger(__name__)

MAGIC = 20240520
HEADER_INTS = 256
HEADER_BYTES = HEADER_INTS * 4
VERSION_DTYPES = {1: np.dtype(np.uint16), 2: np.dtype(np.uint32)}
CHECK_TOKENS = 1 << 16  # tokens read at each of a shard's start, middle and end (dtype tell, bpb)
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
