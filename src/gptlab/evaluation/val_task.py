"""The built-in task `val_continuation`: which of k continuations follows a passage of the val split.

The val split's documents are its runs of tokens between end-of-text ids. An item draws k passages
at uniformly random eligible positions of the split, from k distinct documents; one of them, chosen
uniformly, gives the item its context (the C tokens before its position) and the k continuations
(the L tokens from each position) are the choices, in the order drawn. The label is uniform given
the choices, so a scorer that ignores the context scores 1/k in expectation: only a model that uses
the context beats chance. A split with fewer than k usable documents (the quick presets' one val
document) draws the k passages uniformly over all eligible positions instead, keeping a draw only
when no two passages' C + L windows overlap: the wrong choices then may come from the context's own
document, which makes the task harder, not easier, and the label stays uniform (chance 1/k).

A position is eligible when it lies at least C tokens into its document and L before its end, the
context before it ends in a non-whitespace character and the continuation starts with whitespace (a
word or line boundary, for the right continuation and the distractors alike). An item is kept when
every choice decodes to text that, after the context's text, re-encodes to exactly the context's
tokens then its own L tokens (so every choice is scored on L tokens), no choice is whitespace only
and no two are equal; else it is drawn again. Draws come from a hash of (seed, item, attempt, slot),
not from a library's generator: the same items with every numpy and Python version, for every
training seed. docs/evaluation.md, "The built-in task", says what a score means.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from gptlab.data.paths import resolve_path
from gptlab.evaluation.formats import Item
from gptlab.evaluation.task_cache import cached_items

NAME = "val_continuation"
SCAN_TOKENS = 1 << 23  # tokens read at a time when looking for end-of-text ids
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ValContinuation:
    """The task's construction; every field is part of the items' cache key.

    300 items: the standard error of acc at chance (1/4) is sqrt(0.25 * 0.75 / 300) = 0.025.
    64 + 16 tokens per request fit the default block_size (256) and the quick presets' 32 after
    the scorer cuts the context from the left.
    """

    items: int = 300
    choices: int = 4
    context_tokens: int = 64
    continuation_tokens: int = 16
    max_documents: int = 4096  # a larger split: this many documents, evenly spread over it
    attempts: int = 200  # draws per item before the split is declared unusable
    seed: int = 38

    def __post_init__(self) -> None:
        for name in ("items", "context_tokens", "continuation_tokens", "max_documents", "attempts"):
            if getattr(self, name) < 1:
                raise ValueError(f"{NAME}: {name}={getattr(self, name)} must be >= 1")
        if self.choices < 2:
            raise ValueError(f"{NAME}: choices={self.choices} must be >= 2")


DEFAULT = ValContinuation()


def context_seen(block: int, params: ValContinuation = DEFAULT) -> int:
    """The context tokens a model of this block_size scores each item on: the scorer keeps a
    request's last block_size + 1 tokens, and every item is exactly context_tokens +
    continuation_tokens long, so below that it is the same item with its context's last tokens."""
    return max(0, min(params.context_tokens, block + 1 - params.continuation_tokens))


def measured(block: int, params: ValContinuation = DEFAULT) -> str:
    """What the task measures at this block_size, when that is less context than its items hold."""
    seen, c = context_seen(block, params), params.context_tokens
    return (
        f"{NAME} at block_size={block}: which of {params.choices} continuations of "
        f"{params.continuation_tokens} tokens follows the last {seen} of each item's {c} context "
        f"tokens (the same {params.items} items at every block_size; all {c} from block_size="
        f"{c + params.continuation_tokens - 1}; docs/evaluation.md)"
    )


def draw(seed: int, *key: object) -> int:
    """A uniform 64-bit integer from (seed, key): the task's only source of randomness."""
    digest = hashlib.blake2b(repr((seed, *key)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little")


def documents(tokens: Any, eos: int) -> list[tuple[int, int]]:
    """[start, stop) of each non-empty run of tokens between end-of-text ids, in split order."""
    n = len(tokens)
    hits = [
        np.flatnonzero(np.asarray(tokens[s : s + SCAN_TOKENS]) == eos) + s for s in range(0, n, SCAN_TOKENS)
    ]
    ends = np.concatenate([np.array([-1]), *hits, np.array([n])]).astype(np.int64)
    return [(int(a) + 1, int(b)) for a, b in zip(ends[:-1], ends[1:], strict=True) if b - a > 1]


def spread(runs: list[tuple[int, int]], limit: int) -> list[tuple[int, int]]:
    """At most `limit` of the runs, evenly spread over the split (all of them when fewer)."""
    if len(runs) <= limit:
        return runs
    keep = np.unique(np.linspace(0, len(runs) - 1, limit).round().astype(np.int64))
    return [runs[int(k)] for k in keep]


def whitespace_edges(tokenizer: Any, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(starts with whitespace, ends with whitespace or is empty) per token id, for the ids given."""
    size = int(ids.max()) + 1 if ids.size else 1
    lead = np.zeros(size, dtype=bool)
    tail = np.zeros(size, dtype=bool)
    for t in ids.tolist():
        text = tokenizer.decode([t])
        lead[t] = text[:1].isspace()
        tail[t] = not text or text[-1].isspace()
    return lead, tail


def eligible_positions(
    tokens: Any, tokenizer: Any, runs: list[tuple[int, int]], params: ValContinuation
) -> list[np.ndarray]:
    """Per document, the split positions a passage may start at (see the module docstring)."""
    c, n_cont = params.context_tokens, params.continuation_tokens
    pieces = [np.asarray(tokens[a:b]) for a, b in runs]
    ids = np.unique(np.concatenate(pieces)) if pieces else np.zeros(0, np.int64)
    lead, tail = whitespace_edges(tokenizer, ids)
    out = []
    for (a, b), doc in zip(runs, pieces, strict=True):
        n = b - a
        if n < c + n_cont:
            out.append(np.zeros(0, np.int64))
            continue
        ok = lead[doc[c : n - n_cont + 1]] & ~tail[doc[c - 1 : n - n_cont]]
        out.append(a + c + np.flatnonzero(ok))
    return out


def make_item(
    tokens: Any, tokenizer: Any, starts: Sequence[int], label: int, params: ValContinuation, where: str
) -> Item | None:
    """The item of these passage starts, the label-th giving the context; None when a check fails."""
    c, n_cont = params.context_tokens, params.continuation_tokens
    p = starts[label]
    context_ids = [int(t) for t in tokens[p - c : p]]
    context = tokenizer.decode(context_ids)
    if [int(t) for t in tokenizer.encode(context)] != context_ids:
        return None
    choices = []
    for q in starts:
        ids = [int(t) for t in tokens[q : q + n_cont]]
        text = tokenizer.decode(ids)
        if not text.strip() or [int(t) for t in tokenizer.encode(context + text)] != context_ids + ids:
            return None
        choices.append(text)
    if len(set(choices)) < len(choices):
        return None
    return Item(context, tuple(choices), label, "", where)


class Pool:
    """Every eligible position of the documents used, grouped by document, and distinct-document draws."""

    def __init__(self, positions: list[np.ndarray]) -> None:
        kept = [p for p in positions if p.size]
        self.starts = np.concatenate(kept) if kept else np.zeros(0, np.int64)
        self.counts = np.array([p.size for p in kept], dtype=np.int64)
        self.offsets = np.concatenate([[0], np.cumsum(self.counts)[:-1]]).astype(np.int64)

    @property
    def documents(self) -> int:
        return len(self.counts)

    def passages(self, k: int, seed: int, *key: object) -> list[int]:
        """Starts of k passages from k distinct documents: each drawn uniformly over the positions
        of the documents not drawn yet."""
        picked: list[int] = []
        starts = []
        for slot in range(k):
            left = int(self.starts.size - self.counts[picked].sum())
            r = draw(seed, *key, slot) % left
            for d in sorted(picked):  # skip the drawn documents' ranges, in split order
                if r >= self.offsets[d]:
                    r += int(self.counts[d])
            picked.append(int(np.searchsorted(self.offsets, r, side="right") - 1))
            starts.append(int(self.starts[r]))
        return starts

    def apart(self, k: int, window: tuple[int, int], seed: int, *key: object) -> list[int] | None:
        """Starts of k passages drawn uniformly over every eligible position, from any documents;
        None when two passages' windows (`window` = tokens before, after a start) overlap."""
        starts = [int(self.starts[draw(seed, *key, slot) % self.starts.size]) for slot in range(k)]
        ordered = sorted(starts)
        if any(b - a < sum(window) for a, b in zip(ordered, ordered[1:], strict=False)):
            return None
        return starts


def build_items(tokens: Any, tokenizer: Any, params: ValContinuation = DEFAULT) -> list[Item]:
    """The task's items from a val split's tokens (a 1-D array or memmap) and the tokenizer that
    made them; a split too small for them is refused in one line."""
    eos = tokenizer.eos_id
    if eos is None:
        raise ValueError(
            f"task={NAME} finds the val documents at end-of-text ids, but the tokenizer "
            f"{tokenizer.name!r} has none; accepted: data.tokenizer=byte|bpe|tiktoken, or a "
            "data.tokenizer_path with an end-of-text token"
        )
    runs = documents(tokens, eos)
    pool = Pool(eligible_positions(tokens, tokenizer, spread(runs, params.max_documents), params))
    need = params.context_tokens + params.continuation_tokens
    if pool.documents < 1:
        raise ValueError(
            f"task={NAME} needs a val document of {need} tokens or more with a word boundary; the val "
            f"split has {len(runs)} document(s), none usable, {len(tokens)} tokens; accepted: a larger "
            "val split (data.max_bytes, data.val_fraction)"
        )
    k = params.choices
    distinct = pool.documents >= k
    if not distinct:
        log.warning(
            "%s: the val split has %d usable document(s), fewer than %d choices: wrong choices come "
            "from non-overlapping passages of any document, the context's own included (chance 1/%d)",
            NAME, pool.documents, k, k,
        )  # fmt: skip
    items: list[Item] = []
    seen: set[tuple[str, tuple[str, ...]]] = set()
    for i in range(params.items):
        for attempt in range(params.attempts):
            window = (params.context_tokens, params.continuation_tokens)
            starts = (
                pool.passages(k, params.seed, i, attempt)
                if distinct
                else pool.apart(k, window, params.seed, i, attempt)
            )
            if starts is None:
                continue
            label = draw(params.seed, i, attempt, "label") % k
            item = make_item(tokens, tokenizer, starts, label, params, f"{NAME} item {i + 1}")
            if item is not None and (item.context, item.choices) not in seen:
                seen.add((item.context, item.choices))
                items.append(item)
                break
        else:
            raise ValueError(
                f"task={NAME}: no usable item {i + 1} in {params.attempts} draws from the val "
                f"split ({pool.documents} usable documents, {len(tokens)} tokens): each had two equal "
                "choices, a whitespace-only one, one whose text does not re-encode to its tokens or "
                "(fewer usable documents than choices) overlapping passages; "
                "accepted: a val split of varied text that the tokenizer round-trips"
            )
    return items


def val_continuation(datamodule: Any, params: ValContinuation = DEFAULT) -> list[Item]:
    """The built-in task's items from a TokenDataModule's val split (prepared here if needed),
    cached under data.cache_dir (task_cache)."""
    packed = datamodule.prepare()
    tokens, tokenizer = packed.tokens("val"), packed.tokenizer
    return cached_items(
        NAME,
        asdict(params),
        tokens,
        tokenizer,
        resolve_path(datamodule.cfg.cache_dir),
        lambda: build_items(tokens, tokenizer, params),
    )
