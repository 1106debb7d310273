"""Checksums of packed token files, so a truncated or altered cache is found at start-up and rebuilt.

meta.json records, per file, its size, a CRC-32 of the whole file (for a full `verify`) and a CRC-32
of SAMPLE_BLOCKS blocks at fixed, evenly spread offsets (first and last block included). Start-up
checks the size and the sampled CRC: O(1) in the file's size (64 reads of 4 KiB), which finds
truncation, extension and damage at the ends or in a sampled block. The full CRC is checked once per
version of each file: `verified.json` (next to meta.json) records the size and mtime of the files
whose full CRC matched (the packer writes it, having just computed the CRC of the files it wrote);
a file whose size or mtime differs from that record (rewritten in place, copied, or a cache from
before verified.json) is read whole once more and recorded again. A byte flipped without touching the
mtime (bit rot) is therefore caught only by the sampled blocks.
"""

from __future__ import annotations

import json
import os
import tempfile
import zlib
from pathlib import Path
from typing import Any

SAMPLE_BLOCKS = 64
SAMPLE_BYTES = 4096
_READ = 8 << 20
VERIFIED = "verified.json"


def sample_offsets(size: int) -> list[int]:
    """Start of each sampled block: SAMPLE_BLOCKS evenly spread, the last ending at the file's end."""
    if size <= SAMPLE_BLOCKS * SAMPLE_BYTES:
        return [0]  # small file: the sampled block reads it whole (read_at is given the size)
    last = size - SAMPLE_BYTES
    return [round(i * last / (SAMPLE_BLOCKS - 1)) for i in range(SAMPLE_BLOCKS)]


def sampled_crc(path: Path, size: int) -> int:
    """CRC-32 of the sampled blocks (the whole file when it is small)."""
    crc = 0
    block = size if size <= SAMPLE_BLOCKS * SAMPLE_BYTES else SAMPLE_BYTES
    with open(path, "rb") as fh:
        for off in sample_offsets(size):
            fh.seek(off)
            crc = zlib.crc32(fh.read(block), crc)
    return crc


def full_crc(path: Path) -> int:
    """CRC-32 of the whole file, read in 8 MiB pieces (bounded memory)."""
    crc = 0
    with open(path, "rb") as fh:
        while chunk := fh.read(_READ):
            crc = zlib.crc32(chunk, crc)
    return crc


def describe(path: Path) -> dict[str, int]:
    """What meta.json records of a finished token file."""
    size = path.stat().st_size
    return {"bytes": size, "crc32": full_crc(path), "sampled_crc32": sampled_crc(path, size)}


def problem(directory: Path, files: dict[str, Any], full: bool = False) -> str | None:
    """Why the files in directory differ from what meta.json recorded, or None when they match."""
    for name, want in files.items():
        path = directory / name
        if not path.is_file():
            return f"{name} is missing"
        size = path.stat().st_size
        if size != want["bytes"]:
            return f"{name} has {size} bytes, meta.json recorded {want['bytes']}"
        if sampled_crc(path, size) != want["sampled_crc32"]:
            return f"{name} fails its sampled checksum"
        if full and full_crc(path) != want["crc32"]:
            return f"{name} fails its checksum"
    return None


def stamp(path: Path) -> dict[str, int]:
    """What identifies a version of a file for verified.json: its size and mtime."""
    st = path.stat()
    return {"bytes": st.st_size, "mtime_ns": st.st_mtime_ns}


def record_verified(directory: Path, names: list[str]) -> None:
    """Write verified.json: these files' full CRC matched meta.json at their present size and mtime.
    Atomic (a reader never sees half a record); a read-only cache directory is left as it is."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{VERIFIED}.", dir=directory)
        with os.fdopen(fd, "w") as fh:
            json.dump({name: stamp(directory / name) for name in names}, fh)
        os.replace(tmp, directory / VERIFIED)
    except OSError:
        pass


def unverified_problem(directory: Path, files: dict[str, Any]) -> str | None:
    """The full check, for the files verified.json does not vouch for at their present size and mtime:
    why one fails its full CRC, or None (then verified.json is brought up to date)."""
    try:
        done = json.loads((directory / VERIFIED).read_text())
    except (OSError, ValueError):
        done = {}
    if not isinstance(done, dict):
        done = {}
    todo = [name for name in files if done.get(name) != stamp(directory / name)]
    for name in todo:
        if full_crc(directory / name) != files[name]["crc32"]:
            return f"{name} fails its checksum"
    if todo:
        record_verified(directory, list(files))
    return None
