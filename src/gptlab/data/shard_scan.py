"""Every id of every shard below the vocabulary: the largest id found by a chunked scan of the whole
memmap, once per shard version, recorded in `<data.cache_dir>/shard_scans/` (path, layout, size, mtime)."""

from __future__ import annotations

import json
import logging
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from gptlab.data.paths import stable_hash
from gptlab.data.shard_format import CHECK_TOKENS, Shard

log = logging.getLogger(__name__)

SCAN_TOKENS = 1 << 24  # tokens per chunk of the full max-id scan (32 MiB of uint16)
SCAN_DIR = "shard_scans"  # under data.cache_dir: one JSON record of each scanned shard's largest id


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


def scanned(shard: Shard, cache_root: Path) -> bool:
    rel, key = _scan_record(shard)
    try:
        record = json.loads((cache_root / rel).read_text())
    except (OSError, ValueError):
        return False
    return isinstance(record, dict) and {k: record.get(k) for k in key} == key
