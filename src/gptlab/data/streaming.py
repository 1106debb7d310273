"""Documents as a stream of UTF-8 pieces, never a whole corpus in memory.

A piece is (raw UTF-8 bytes, ends_document). Two producers: a text file split at data.doc_separator
while it is read in 8 MiB chunks, and the rows of a `datasets` streaming dataset (a hub set, or local
parquet/json files through the same streaming API). A document longer than MAX_PIECE comes in
several pieces (cut at a character boundary, no end-of-text token between them) so memory stays
bounded even when the separator never occurs.
"""

from __future__ import annotations

import codecs
import logging
from collections.abc import Iterable, Iterator
from pathlib import Path

import datasets

from gptlab.data.config import DataConfig
from gptlab.data.sources import (
    _builder_for,
    _connection_errors,
    _hub_unreachable,
    _take_bytes,
    resolve_files,
    resolve_path,
)

log = logging.getLogger(__name__)

Piece = tuple[bytes, bool]
READ_CHUNK = 8 << 20
MAX_PIECE = 16 << 20
ONE_DOCUMENT_WARN_BYTES = 100 << 20  # a file this big without the separator is probably a mistake


def separator_bytes(separator: str) -> bytes:
    """data.doc_separator as bytes; the escapes \\n, \\t and \\r in it are understood (shell-friendly)."""
    sep = separator.replace("\\n", "\n").replace("\\t", "\t").replace("\\r", "\r")
    if not sep:
        raise ValueError("data.doc_separator='' is empty; give a string such as '<|endoftext|>' or '\\n\\n'")
    return sep.encode("utf-8")


def _char_boundary(buf: bytes, k: int) -> int:
    """Largest index <= k that does not fall inside a UTF-8 multi-byte character."""
    while k > 0 and (buf[k] & 0xC0) == 0x80:
        k -= 1
    return k


class _Utf8Guard:
    """Refuses NUL bytes and invalid UTF-8 as the file streams by, naming the file and offset."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.decoder = codecs.getincrementaldecoder("utf-8")()
        self.offset = 0

    def feed(self, chunk: bytes, final: bool = False) -> None:
        nul = chunk.find(b"\x00")
        if nul >= 0:
            raise ValueError(
                f"data.path: {self.path} looks binary (NUL byte at offset {self.offset + nul}); "
                "accepted: UTF-8 text files"
            )
        try:
            self.decoder.decode(chunk, final=final)
        except UnicodeDecodeError as e:
            raise ValueError(
                f"data.path: {self.path} is not UTF-8 (byte offset ~{self.offset + e.start}: {e.reason}); "
                "accepted: UTF-8 text files"
            ) from None
        self.offset += len(chunk)


def file_pieces(path: Path, sep: bytes) -> Iterator[Piece]:
    """The documents of one file, split at sep (verbatim; whitespace-only documents are dropped)."""
    guard = _Utf8Guard(path)
    carry = b""
    found = 0
    open_doc = False  # a piece of the current document was yielded: its end must be yielded too
    with open(path, "rb") as fh:
        while chunk := fh.read(READ_CHUNK):
            guard.feed(chunk)
            parts = (carry + chunk).split(sep)
            carry = parts.pop()
            found += len(parts)
            for p in parts:
                if p.strip() or open_doc:
                    yield p, True
                open_doc = False
            if len(carry) > MAX_PIECE:  # keep len(sep)-1 bytes: the separator may straddle chunks
                k = _char_boundary(carry, len(carry) - len(sep) + 1)
                yield carry[:k], False
                carry, open_doc = carry[k:], True
    guard.feed(b"", final=True)
    if carry.strip() or open_doc:
        yield carry, True
    size = path.stat().st_size
    if found == 0 and size > ONE_DOCUMENT_WARN_BYTES:
        log.warning(
            "data.doc_separator=%r never occurs in %s (%d MB): it is read as one document",
            sep.decode(),
            path,
            size >> 20,
        )


def text_pieces(cfg: DataConfig) -> Iterator[Piece]:
    """Every file of data.path in order, split at data.doc_separator; data.max_bytes applied."""
    assert cfg.path is not None and cfg.doc_separator is not None
    sep = separator_bytes(cfg.doc_separator)
    pieces = (p for f in resolve_files(cfg.path) for p in file_pieces(f, sep))
    return limit_pieces(pieces, cfg.max_bytes)


def limit_pieces(pieces: Iterable[Piece], max_bytes: int | None) -> Iterator[Piece]:
    """Pieces until max_bytes bytes; the last is cut at a character boundary and ends its document."""
    if max_bytes is None:
        yield from pieces
        return
    left = max_bytes
    for raw, end in pieces:
        if len(raw) >= left:
            cut = raw[: _char_boundary(raw + b" ", left)]
            if cut:
                yield cut, True
            return
        left -= len(raw)
        yield raw, end


def _streaming_dataset(cfg: DataConfig) -> datasets.IterableDataset:
    """datasets' streaming mode over the hub set, or over the local files in data.path."""
    if cfg.path:
        local = resolve_path(cfg.path)
        if local.is_dir():
            return datasets.load_dataset(str(local), cfg.subset, split=cfg.split, streaming=True)
        files = resolve_files(cfg.path)
        builder = _builder_for(files, f"data.path={cfg.path!r}")
        return datasets.load_dataset(
            builder, data_files=[str(f) for f in files], split="train", streaming=True
        )
    return datasets.load_dataset(cfg.name, cfg.subset, split=cfg.split, streaming=True)


def hub_texts(cfg: DataConfig) -> Iterator[str | None]:
    """The text column of a streamed dataset, row by row, as the rows arrive."""
    try:
        stream = _streaming_dataset(cfg)
        for batch in stream.iter(batch_size=256):
            if cfg.text_column not in batch:
                raise ValueError(
                    f"data.text_column={cfg.text_column!r} is not a column of "
                    f"{cfg.name or cfg.path}; accepted: one of {sorted(batch)}"
                )
            yield from batch[cfg.text_column]
    except _connection_errors() as e:
        raise _hub_unreachable(cfg, e) from e


def hub_pieces(cfg: DataConfig) -> Iterator[Piece]:
    """One piece per row (each row is a document), up to data.max_bytes."""
    texts: Iterable[str | None] = hub_texts(cfg)
    if cfg.max_bytes is not None:
        texts = _take_bytes(texts, cfg.max_bytes)
    return (((t or "").encode("utf-8"), True) for t in texts)


def streamed(cfg: DataConfig) -> bool:
    """Whether the corpus is packed by the streaming packer (bounded memory) instead of datasets.map."""
    return (cfg.source == "text" and cfg.doc_separator is not None) or (cfg.source == "hub" and cfg.streaming)


def pieces(cfg: DataConfig) -> Iterator[Piece]:
    """The configured stream of pieces."""
    return text_pieces(cfg) if cfg.source == "text" else hub_pieces(cfg)
