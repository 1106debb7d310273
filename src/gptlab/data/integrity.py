"""Checksums of packed token files, so a truncated or altered cache is found at start-up and rebuilt.

meta.json records, per file, its size, a CRC-32 of the whole file (for a full `verify`) and a CRC-32
of SAMPLE_BLOCKS blocks at fixed, evenly spread offsets (first and last block included). Start-up
checks the size and the sampled CRC only: O(1) in the file's size (64 reads of 4 KiB), which finds
truncation, extension and damage at the ends or in a sampled block, not every flipped byte.
"""

from __future__ import annotations

import zlib
from pathlib import Path
from typing import Any

SAMPLE_BLOCKS = 64
SAMPLE_BYTES = 4096
_READ = 8 << 20


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
