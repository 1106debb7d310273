"""Built-in tasks' items cached beside the packed tokens: `<data.cache_dir>/tasks/<name>-<key>.json`.

The key is a sha256 (16 hex digits) of {format, the task's name and parameters, the sha256 of the
val split's tokens as stored, the tokenizer's spec}: another split, tokenizer or construction is
another file, so a cached file is never read for data it was not built from. A file is written whole
under a temporary name and renamed (atomic: a reader sees all of it or none), and trusted only when
it parses, names its own key and its items hash to the checksum it records; otherwise one warning
line says why, and the items are built again and the file rewritten.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from gptlab.data.paths import stable_hash
from gptlab.data.spec import tokenizer_spec
from gptlab.evaluation.formats import Item

FORMAT = 2  # bump when the file layout or an item's construction changes: old files are then ignored
HASH_TOKENS = 1 << 23  # tokens hashed at a time
log = logging.getLogger(__name__)


def tokens_sha256(tokens: Any) -> str:
    """sha256 of a split's tokens as stored (their dtype included), read in bounded pieces."""
    h = hashlib.sha256(str(np.asarray(tokens[:0]).dtype).encode())
    for start in range(0, len(tokens), HASH_TOKENS):
        h.update(np.ascontiguousarray(tokens[start : start + HASH_TOKENS]).tobytes())
    return h.hexdigest()


def items_key(name: str, params: dict[str, Any], tokens: Any, tokenizer: Any) -> str:
    """What the items are a function of: the task, its parameters, the val tokens, the tokenizer."""
    spec = json.dumps(tokenizer_spec(tokenizer), sort_keys=True)
    return stable_hash(
        {
            "format": FORMAT,
            "task": name,
            "params": params,
            "val_sha256": tokens_sha256(tokens),
            "tokenizer": hashlib.sha256(spec.encode()).hexdigest(),
        }
    )


def _rows(items: list[Item]) -> list[dict[str, Any]]:
    return [
        {
            "context": i.context,
            "choices": list(i.choices),
            "label": i.label,
            "delimiter": i.delimiter,
            "where": i.where,
        }
        for i in items
    ]


def _checksum(rows: list[dict[str, Any]]) -> str:
    return hashlib.sha256(json.dumps(rows, sort_keys=True).encode()).hexdigest()


def read_items(path: Path, key: str) -> list[Item] | None:
    """The items of a trusted cache file; None when there is none, or (with a warning) when it is
    damaged: unreadable, another key, or items that do not match their checksum."""
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        rows = record["items"]
        if record.get("format") != FORMAT or record.get("key") != key:
            why = f"it records format {record.get('format')!r} and key {record.get('key')!r}"
        elif _checksum(rows) != record.get("sha256"):
            why = "its items do not match their checksum"
        else:
            return [
                Item(r["context"], tuple(r["choices"]), int(r["label"]), r["delimiter"], r["where"])
                for r in rows
            ]
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as e:
        why = f"it is unreadable ({type(e).__name__})"
    log.warning("cached task items at %s are damaged (%s): building them again", path, why)
    return None


def write_items(path: Path, key: str, items: list[Item]) -> None:
    """Write the items atomically; a cache directory that cannot be written is said and skipped."""
    rows = _rows(items)
    record = {"format": FORMAT, "key": key, "items": rows, "sha256": _checksum(rows)}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(record, fh)
            os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide the cache from a shared cache's other users
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as e:
        log.warning("cannot cache task items at %s (%s): they are built again next time", path, e.strerror)


def cached_items(
    name: str,
    params: dict[str, Any],
    tokens: Any,
    tokenizer: Any,
    root: Path,
    build: Callable[[], list[Item]],
) -> list[Item]:
    """The task's items from `root/tasks/`, or built (and cached) when no trusted file holds them."""
    key = items_key(name, params, tokens, tokenizer)
    path = root / "tasks" / f"{name}-{key}.json"
    items = read_items(path, key)
    if items is None:
        items = build()
        write_items(path, key, items)
    else:
        log.info("%s: %d items from %s", name, len(items), path)
    return items
