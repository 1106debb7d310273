"""Empty and whitespace-only documents, dropped from every source before packing: each would pack as a
lone end-of-text id, a boundary with no text around it. One rule for every kind of source, so a corpus
packs the same documents whether it is streamed or loaded, split at a separator or one file a document.

Whitespace is what bytes.isspace counts (the ASCII space, tab, newline, carriage return, vertical tab and
form feed): a document of other Unicode spaces (U+00A0, U+3000) is text and is kept.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # only loaders pass a Dataset (data.sources: no datasets import on a cached run)
    import datasets

log = logging.getLogger(__name__)

WHITESPACE = " \t\n\r\x0b\x0c"  # exactly the bytes bytes.isspace() is true for
_BLANK_RE = r"^[ \t\n\r\v\f]*$"  # the same set in RE2's syntax, for Arrow columns


def is_blank(text: str | None) -> bool:
    """Whether a document is missing, empty or only whitespace."""
    return not text or not text.strip(WHITESPACE)


def drop_blank(ds: datasets.Dataset) -> datasets.Dataset:
    """ds without its blank rows (column "text"), order kept; ds itself when it has none."""
    import pyarrow.compute as pc  # only loaders call this: a cached run never imports pyarrow

    masks = [
        pc.fill_null(pc.match_substring_regex(batch.column("text"), _BLANK_RE), True).to_numpy(
            zero_copy_only=False
        )
        for batch in ds.with_format("arrow").iter(batch_size=10_000)
    ]
    blank = np.concatenate(masks) if masks else np.zeros(0, bool)
    if not blank.any():
        return ds
    log.info("dropped %d empty or whitespace-only documents of %d", int(blank.sum()), len(ds))
    return ds.select(np.flatnonzero(~blank))
