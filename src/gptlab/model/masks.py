"""Which keys a query may see: the causal mask, a sliding window (model.window, model.window_pattern)
and document boundaries inside a packed window (data.document_mask).

Masks are boolean (True = attend) and go to SDPA's `attn_mask` (or the soft-capped path). Why not
FlexAttention: on a CPU in torch 2.13 its eager form runs a slow fallback and its compiled form
compiles for ~30 s per shape (docs/architecture.md, "Attention axes"); a dense mask runs everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

PATTERN_LETTERS = "SL"  # S: a local (windowed) layer, L: a global one
DOCUMENT_POSITIONS = ("restart", "continue")


def check_window(window: object, pattern: object) -> None:
    """model.window and model.window_pattern, refused in one line naming the field."""
    if window is not None and (isinstance(window, bool) or not isinstance(window, int) or window <= 0):
        raise ValueError(
            f"model.window={window!r} is not accepted; give a positive integer (the tokens a query "
            "sees, itself included) or null (every layer global)"
        )
    if pattern is None:
        return
    if not isinstance(pattern, str) or not pattern or set(pattern) - set(PATTERN_LETTERS):
        raise ValueError(
            f"model.window_pattern={pattern!r} is not accepted; give a non-empty string of the letters "
            "S (local) and L (global), e.g. SSSL, or null (every layer local when model.window is set)"
        )
    if window is None:
        raise ValueError(
            f"model.window_pattern={pattern!r} needs model.window (the local layers' width); "
            "accepted with window=null: window_pattern=null"
        )


def layer_window(window: int | None, pattern: str | None, i: int) -> int | None:
    """Layer i's window: `window` where pattern[i % len(pattern)] is 'S' (every layer without a
    pattern), None (global) otherwise."""
    if window is None or (pattern is not None and pattern[i % len(pattern)] != "S"):
        return None
    return window


def causal_window(T: int, window: int | None, device: torch.device | str) -> torch.Tensor:
    """(T, T) bool: query i sees key j when j <= i and, under a window W, i - j < W (W keys, itself
    included: the convention of Mistral's `sliding_window`)."""
    i = torch.arange(T, device=device)[:, None]
    j = torch.arange(T, device=device)[None, :]
    seen = j <= i
    return seen if window is None else seen & (i - j < window)


@dataclass(frozen=True)
class Documents:
    """Document masking inside a packed window: the end-of-text id `eot` opens a document (as a BOS
    would: it belongs to the document after it, so it sees only itself), and no query sees a key of
    another document. `positions`: restart (each document's positions count from 0 at its eot; the
    window's first, cut document from 0 at the window's start) or continue (the window's 0..T-1)."""

    eot: int
    positions: str = "restart"

    def ids(self, idx: torch.Tensor) -> torch.Tensor:
        """(B, T) document index of each token: the eots at or before it."""
        return (idx == self.eot).long().cumsum(dim=1)

    def position_ids(self, idx: torch.Tensor) -> torch.Tensor | None:
        """(B, T) positions restarting at each eot, or None (continue: the plain 0..T-1)."""
        if self.positions != "restart":
            return None
        T = idx.shape[1]
        t = torch.arange(T, device=idx.device).expand_as(idx)
        starts = torch.where(idx == self.eot, t, torch.zeros_like(t)).cummax(dim=1).values
        return t - starts


def same_document(doc: torch.Tensor) -> torch.Tensor:
    """(B, 1, T, T) bool: query and key in one document (broadcast over the heads)."""
    return (doc[:, :, None] == doc[:, None, :])[:, None]


class MaskCache:
    """The (T, T) causal-window masks, built once per (T, window, device) and kept (a few KiB each:
    one per distinct window, not per layer)."""

    def __init__(self) -> None:
        self.masks: dict[tuple[int, int, str], torch.Tensor] = {}

    def get(self, T: int, window: int, device: torch.device) -> torch.Tensor:
        key = (T, window, str(device))
        mask = self.masks.get(key)
        if mask is None or mask.device != device:
            mask = self.masks[key] = causal_window(T, window, device)
        return mask


@dataclass(frozen=True)
class Packed:
    """Sequences that share a prefix, packed into one row as a tree: the prefix once, then each
    sequence's own tokens (the task scorer's choices of one context, evaluation/shared_prefix.py).
    `order` (B, T): each token's index in its own sequence; `seen` (B, T, T) bool: key k is a token
    of query q's own sequence at or before it. The model gives each token the positions, documents
    and masks it has in its own sequence, so its logits equal that sequence's up to float rounding."""

    order: torch.Tensor
    seen: torch.Tensor

    def eots_seen(self, idx: torch.Tensor, eot: int) -> torch.Tensor:
        """(B, T, T) bool: key k is an end-of-text id on query q's sequence at or before it."""
        return self.seen & (idx == eot)[:, None, :]

    def positions(self, idx: torch.Tensor, documents: Documents | None) -> torch.Tensor:
        """(B, T) position ids: `order`, or under documents with restart what Documents.position_ids
        gives in the token's own sequence (its index minus that of the last eot at or before it)."""
        if documents is None or documents.positions != "restart":
            return self.order
        marks = torch.where(self.eots_seen(idx, documents.eot), self.order[:, None, :], 0)
        return self.order - marks.amax(dim=-1)

    def mask(self, window: int | None, idx: torch.Tensor, documents: Documents | None) -> torch.Tensor:
        """(B, 1, T, T) bool: `seen`, within the window by each sequence's own indices, and within
        one document (the same count of eots seen: Documents.ids in the token's own sequence)."""
        m = self.seen
        if window is not None:
            m = m & (self.order[:, :, None] - self.order[:, None, :] < window)
        if documents is not None:
            doc = self.eots_seen(idx, documents.eot).sum(dim=-1)
            m = m & (doc[:, :, None] == doc[:, None, :])
        return m[:, None]
