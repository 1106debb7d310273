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
"""

from __future__ import annotations

from typing import Any

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


def order_by_context(encoded: list[Request]) -> list[int]:
    """The requests' indices, those of one context together (in their own order), the contexts
    longest packed row first (least padding in a batch)."""
    groups: dict[tuple[int, ...], list[int]] = {}
    for k, request in enumerate(encoded):
        groups.setdefault(context_of(request), []).append(k)

    def length(members: list[int]) -> int:
        return len(context_of(encoded[members[0]])) + sum(encoded[k][1] - 1 for k in members)

    return [k for members in sorted(groups.values(), key=lambda m: -length(m)) for k in members]


def rows_of(chunk: list[int], encoded: list[Request], limit: int) -> list[list[int]]:
    """A batch's requests split into rows: consecutive requests of one context, at most `limit`
    tokens a row (a request alone is always a row)."""
    rows: list[list[int]] = []
    size = 0
    for k in chunk:
        tokens, n_cont = encoded[k]
        row = rows[-1] if rows else None
        if row and context_of(encoded[row[0]]) == context_of(encoded[k]) and size + n_cont - 1 <= limit:
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


def score_packed(
    model: Any, encoded: list[Request], batch_size: int, device: torch.device
) -> list[tuple[float, bool]]:
    """(log-likelihood, is_greedy) of each request, the requests of one context scored in one row;
    returned in the requests' order."""
    order = order_by_context(encoded)
    limit = ROW_BLOCKS * int(model.cfg.block_size)
    out: list[tuple[float, bool]] = [(0.0, False)] * len(encoded)
    for start in range(0, len(order), batch_size):
        rows = rows_of(order[start : start + batch_size], encoded, limit)
        packed = [pack_row([encoded[k] for k in row]) for row in rows]
        width = max(len(p[0]) for p in packed)
        idx = torch.zeros(len(rows), width, dtype=torch.long)
        pos = torch.zeros(len(rows), width, dtype=torch.long)
        for r, (tokens, positions, _, _) in enumerate(packed):
            idx[r, : len(tokens)] = torch.tensor(tokens)
            pos[r, : len(tokens)] = torch.tensor(positions)
        contexts = [len(context_of(encoded[row[0]])) for row in rows]
        seen = seen_of(width, [(m, p[2]) for m, p in zip(contexts, packed, strict=True)])
        logits = model(idx.to(device), packed=Packed(pos.to(device), seen.to(device)))
        for r, row in enumerate(rows):
            predict = packed[r][3]
            at = torch.tensor([i for p in predict for i in p], device=logits.device)
            targets = torch.tensor(
                [t for k in row for t in encoded[k][0][-encoded[k][1] :]], device=logits.device
            )
            logp = torch.log_softmax(logits[r, at].float(), dim=-1)
            hits = logp.argmax(dim=-1) == targets
            picked = logp.gather(-1, targets[:, None])[:, 0].double()
            first = 0
            for k in row:
                n = encoded[k][1]
                out[k] = (float(picked[first : first + n].sum()), bool(hits[first : first + n].all()))
                first += n
    return out
