"""Scoring requests that share a context with one pass over the context (issue 48 item 5).

A multiple-choice item is k requests with the same context tokens: scored one by one, the model runs
the context k times. Here the requests of one context go into one row, the context once and then each
continuation's tokens (all but its last, which is only a target), packed as a tree (model/masks.py,
`Packed`): every token sees its own request's tokens at its own positions, so each request's
log-likelihood is the one it gets alone, up to float rounding (the masked attention kernel sums in
another order than the causal one). The 300 items of `val_continuation` at block_size 64 are 4 × 64
token-forwards an item alone and 49 + 4 × 15 = 109 packed.

Requests are taken in batches of `batch_size` as before (so a forward holds at most that many, and the
number of forwards is the same as one request a row: FSDP ranks count on it); within a batch the
requests of one context make one row, cut into rows of at most ROW_BLOCKS block_sizes of tokens.

What a forward reads depends only on the requests, the batch size and the block: `plan` builds it
once (token rows, positions, each row's context and spans, the logits each request's score reads),
so a task scored at every evaluation of a run (callbacks/tasks.py) pays for it once; each forward's
scores are then read for the whole batch at once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from gptlab.model.gpt import GPT
from gptlab.model.masks import Packed
from gptlab.model.moe import MoE

ROW_BLOCKS = 2  # a packed row's tokens at most, in block_sizes: bounds its (T, T) masks and scores

Request = tuple[list[int], int]  # (tokens, n_cont), at most block_size + 1 tokens


def packs(model: Any) -> bool:
    """Whether the model scores packed rows as it scores their requests: a GPT whose MoE layers, if
    any, drop no tokens (a capacity counts the tokens of a forward, which packing changes)."""
    if not isinstance(model, GPT):
        return False
    return not any(isinstance(m, MoE) and m.mcfg.capacity_factor is not None for m in model.modules())


def context_of(request: Request) -> tuple[int, ...]:
    """The tokens before the continuation (at least one: encode_request's context or prefix)."""
    tokens, n_cont = request
    return tuple(tokens[: len(tokens) - n_cont])


def context_groups(encoded: list[Request]) -> list[int]:
    """Each request's context as a number (requests with equal context tokens share one)."""
    ids: dict[tuple[int, ...], int] = {}
    return [ids.setdefault(context_of(request), len(ids)) for request in encoded]


def order_by_context(encoded: list[Request], group: list[int]) -> list[int]:
    """The requests' indices, those of one context together (in their own order), the contexts
    longest packed row first (least padding in a batch)."""
    members: dict[int, list[int]] = {}
    for k, g in enumerate(group):
        members.setdefault(g, []).append(k)

    def length(ks: list[int]) -> int:
        tokens, n_cont = encoded[ks[0]]
        return len(tokens) - n_cont + sum(encoded[k][1] - 1 for k in ks)

    return [k for ks in sorted(members.values(), key=lambda m: -length(m)) for k in ks]


def rows_of(chunk: list[int], encoded: list[Request], limit: int, group: list[int]) -> list[list[int]]:
    """A batch's requests split into rows: consecutive requests of one context, at most `limit`
    tokens a row (a request alone is always a row)."""
    rows: list[list[int]] = []
    size = 0
    for k in chunk:
        tokens, n_cont = encoded[k]
        row = rows[-1] if rows else None
        if row and group[row[0]] == group[k] and size + n_cont - 1 <= limit:
            row.append(k)
            size += n_cont - 1
        else:
            rows.append([k])
            size = len(tokens) - 1
    return rows


def pack_row(members: list[Request]) -> tuple[list[int], list[int], list[tuple[int, int]], list[list[int]]]:
    """One row: (tokens, order, each request's span (start, length) of packed tokens, per request
    the packed indices whose logits predict its continuation).

    The context's m tokens come first (order 0..m-1) and see each other causally; each request's
    continuation tokens but its last follow (order m..), each seeing the context and its own span
    causally. A request's first continuation token is predicted at the context's last token, the
    next ones at its own span."""
    m = len(context_of(members[0]))
    tokens, order = list(members[0][0][:m]), list(range(m))
    spans, predict = [], []
    for request_tokens, _ in members:
        own = request_tokens[m:-1]  # the continuation's tokens that are inputs
        start = len(tokens)
        spans.append((start, len(own)))
        predict.append([m - 1, *range(start, start + len(own))])
        tokens += own
        order += range(m, m + len(own))
    return tokens, order, spans, predict


def seen_of(width: int, rows: list[tuple[int, list[tuple[int, int]]]]) -> torch.Tensor:
    """(rows, width, width) bool `seen` of packed rows given (context length, spans) each; padding
    sees only itself (no query's softmax is over nothing)."""
    seen = torch.eye(width, dtype=torch.bool).repeat(len(rows), 1, 1)
    causal = torch.ones(width, width, dtype=torch.bool).tril()
    for r, (m, spans) in enumerate(rows):
        seen[r, :m, :m] = causal[:m, :m]
        for start, n in spans:
            seen[r, start : start + n, :m] = True
            seen[r, start : start + n, start : start + n] = causal[:n, :n]
    return seen


@dataclass(frozen=True)
class Batch:
    """One forward's inputs and where its requests' scores lie (CPU tensors, built once by `plan`).

    `rows`: each row's (context length, its requests' spans), from which `seen` is built per forward
    (a (T, T) mask a row kept for every forward would make a long task's plan large); `at` (P,): the
    indices into the flattened (rows × width) logits that predict continuation tokens, request after
    request, `targets` (P,) those tokens; `counts`: how many of them each request has (its n_cont)."""

    requests: list[int]
    idx: torch.Tensor
    order: torch.Tensor
    rows: list[tuple[int, list[tuple[int, int]]]]
    at: torch.Tensor
    targets: torch.Tensor
    counts: list[int]

    def seen(self) -> torch.Tensor:
        """(rows, width, width) bool: Packed.seen of this forward (seen_of)."""
        return seen_of(self.idx.shape[1], self.rows)


def batch_of(chunk: list[int], encoded: list[Request], limit: int, group: list[int]) -> Batch:
    """The Batch of one chunk of requests (indices into `encoded`), packed into rows."""
    rows = rows_of(chunk, encoded, limit, group)
    packed = [pack_row([encoded[k] for k in row]) for row in rows]
    width = max(len(p[0]) for p in packed)
    idx: list[int] = []  # (rows, width), flattened
    order: list[int] = []
    shape: list[tuple[int, list[tuple[int, int]]]] = []
    at: list[int] = []
    targets: list[int] = []
    counts: list[int] = []
    requests: list[int] = []
    for r, (row, (tokens, positions, spans, predict)) in enumerate(zip(rows, packed, strict=True)):
        pad = [0] * (width - len(tokens))
        idx += tokens + pad
        order += positions + pad
        shape.append((len(tokens) - sum(n for _, n in spans), spans))  # the spans follow the context
        for k, where in zip(row, predict, strict=True):
            tokens_k, n_cont = encoded[k]
            at += [r * width + p for p in where]
            targets += tokens_k[-n_cont:]
            counts.append(n_cont)
            requests.append(k)
    as_long = lambda v: torch.from_numpy(np.array(v, dtype=np.int64))  # noqa: E731  (3x torch.tensor's speed)
    grid = lambda v: as_long(v).view(len(rows), width)  # noqa: E731
    return Batch(requests, grid(idx), grid(order), shape, as_long(at), as_long(targets), counts)


def plan(encoded: list[Request], batch_size: int, block: int) -> list[Batch]:
    """Every forward's Batch: the requests grouped by context, `batch_size` requests a forward."""
    group = context_groups(encoded)
    order = order_by_context(encoded, group)
    limit = ROW_BLOCKS * block
    return [
        batch_of(order[s : s + batch_size], encoded, limit, group) for s in range(0, len(order), batch_size)
    ]


def score_plan(
    model: Any, batches: list[Batch], n_requests: int, device: torch.device
) -> list[tuple[float, bool]]:
    """(log-likelihood, is_greedy) of each of the plan's `n_requests` requests, in their order.

    Per forward, the logits that predict continuation tokens go through one log_softmax (row by row:
    the values of one row a request) and come to the host at once; a request's log-likelihood is
    math.fsum of its float32 log-probabilities, the correctly rounded float64 sum (what any order of
    float64 additions gives when, as for a few float32 terms, every partial sum is exact)."""
    out: list[tuple[float, bool]] = [(0.0, False)] * n_requests
    for b in batches:
        logits = model(b.idx.to(device), packed=Packed(b.order.to(device), b.seen().to(device)))
        on = logits.device
        targets = b.targets.to(on)
        flat = logits.reshape(-1, logits.shape[-1]).index_select(0, b.at.to(on))
        logp = torch.log_softmax(flat.float(), dim=-1)
        picked = logp.gather(-1, targets[:, None])[:, 0].double().tolist()
        hits = (logp.argmax(dim=-1) == targets).tolist()
        first = 0
        for k, n in zip(b.requests, b.counts, strict=True):
            out[k] = (math.fsum(picked[first : first + n]), all(hits[first : first + n]))
            first += n
    return out
