"""The split rule and the token files' element type: which documents (or shards) are held out for
validation, deterministically, and the narrowest dtype a vocabulary fits."""

from __future__ import annotations

import numpy as np


def token_dtype(vocab_size: int) -> np.dtype:
    """Smallest file dtype for the vocabulary: uint8 for the byte tokenizer's 256 ids (half the bytes
    to write and read), uint16 up to 65536 ids, else uint32."""
    if vocab_size > 1 << 32:
        raise ValueError(f"a vocabulary of {vocab_size} ids does not fit the widest token files (uint32)")
    if vocab_size <= 256:
        return np.dtype(np.uint8)
    return np.dtype(np.uint16 if vocab_size <= 65536 else np.uint32)


def val_period(val_fraction: float) -> int:
    """Document i goes to val iff i % val_period == 0."""
    if not isinstance(val_fraction, int | float) or not 0 < val_fraction <= 0.5:
        raise ValueError(f"data.val_fraction={val_fraction!r} must be in (0, 0.5]")
    return max(2, round(1 / val_fraction))


def val_mask(n_docs: int, val_fraction: float, groups: list[str] | None = None) -> np.ndarray:
    """Deterministic split: True where the document is held out for validation.

    Without groups, document i is val iff i % val_period == 0. With groups (one label per
    document), the same rule picks groups, numbered in order of first appearance, so every document
    of a group lands on the same side; a single group falls back to the per-document rule.
    """
    period = val_period(val_fraction)
    units = np.arange(n_docs)
    if groups is not None:
        labels = np.asarray(groups, dtype=object)
        _, first, inverse = np.unique(labels, return_index=True, return_inverse=True)
        if len(first) > 1:
            order = np.empty(len(first), dtype=np.int64)
            order[np.argsort(first)] = np.arange(len(first))  # group ordinal by first appearance
            units = order[inverse.reshape(-1)]
    mask = units % period == 0
    if n_docs and not mask.any():  # cannot happen with the rule above; kept as the contract says
        mask[-1] = True
    return mask
