"""Documents as a stream of UTF-8 pieces, never a whole corpus in memory.

A piece is raw UTF-8 bytes and whether it ends its document; they travel in chunks (two parallel
lists), so the per-document cost stays in C-level list operations. Two producers: a text file split
at data.doc_separator while it is read in 8 MiB chunks, and the rows of a `datasets` streaming
dataset (a hub set, or local parquet/json files through the same streaming API). A document longer
than MAX_PIECE comes in several pieces (cut at a character boundary, no end-of-text token between
them) so memory stays
bounded even when the separator never occurs.
"""

from __future__ import annotations

import codecs
import logging
from collections.abc import Iterable, Iterator
from pathlib import Path

from gptlab.data.plan import SourcePlan
from gptlab.data.sources.blank import is_blank

log = logging.getLogger(__name__)

Piece = tuple[bytes, bool]
Chunk = tuple[list[bytes], list[bool]]  # pieces, and for each whether it ends its document
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


def file_pieces(path: Path, sep: bytes) -> Iterator[Chunk]:
    """The documents of one file, split at sep (verbatim; blank documents are dropped: bytes.isspace,
    the rule of sources.blank)."""
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
            if not found and guard.offset - len(chunk) < ONE_DOCUMENT_WARN_BYTES <= guard.offset:
                log.warning(
                    "data.doc_separator=%r does not occur in the first %d MB of %s: read as one document",
                    sep.decode(),
                    ONE_DOCUMENT_WARN_BYTES >> 20,
                    path,
                )
            if parts:
                head = [parts[0]] if open_doc or not parts[0].isspace() and parts[0] else []
                docs = head + [p for p in parts[1:] if p and not p.isspace()]
                open_doc = False
                yield docs, [True] * len(docs)
            if len(carry) > MAX_PIECE:  # keep len(sep)-1 bytes: the separator may straddle chunks
                k = _char_boundary(carry, len(carry) - len(sep) + 1)
                yield [carry[:k]], [False]
                carry, open_doc = carry[k:], True
    guard.feed(b"", final=True)
    if open_doc or (carry and not carry.isspace()):
        yield [carry], [True]


def text_pieces(src: SourcePlan) -> Iterator[Chunk]:
    """Every file of data.path in order, split at data.doc_separator; data.max_bytes applied."""
    assert src.doc_separator is not None
    sep = separator_bytes(src.doc_separator)
    chunks = (c for f in src.files for c in file_pieces(f, sep))
    return limit_pieces(chunks, src.max_bytes)


def limit_pieces(chunks: Iterable[Chunk], max_bytes: int | None) -> Iterator[Chunk]:
    """Pieces until max_bytes bytes; the last is cut at a character boundary and ends its document
    (a cut that would start a document with only whitespace is dropped, as blank documents are)."""
    if max_bytes is None:
        yield from chunks
        return
    left = max_bytes
    starts = True  # the next piece starts a document
    for raws, ends in chunks:
        size = sum(map(len, raws))
        if size < left:
            left -= size
            yield raws, ends
            starts = ends[-1] if ends else starts
            continue
        kept_raws, kept_ends = [], []
        for raw, end in zip(raws, ends, strict=True):
            if len(raw) >= left:
                cut = raw[: _char_boundary(raw + b" ", left)]
                if not starts or (cut and not cut.isspace()):
                    kept_raws.append(cut)
                    kept_ends.append(True)
                break
            left -= len(raw)
            kept_raws.append(raw)
            kept_ends.append(end)
            starts = end
        yield kept_raws, kept_ends
        return


def hub_pieces(src: SourcePlan) -> Iterator[Chunk]:
    """One piece per row (each row is a document; blank rows dropped), up to data.max_bytes."""
    from gptlab.data.sources.hub import hub_texts  # imports datasets: a text file's stream needs none

    rows = ([t.encode("utf-8") for t in texts if t and not is_blank(t)] for texts in hub_texts(src))
    return limit_pieces(((raws, [True] * len(raws)) for raws in rows), src.max_bytes)


def pieces(src: SourcePlan) -> Iterator[Chunk]:
    """The configured stream of pieces."""
    return text_pieces(src) if src.kind == "text" else hub_pieces(src)
