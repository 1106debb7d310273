"""The attention family of layer telemetry from one attention's q and k: the largest pre-softmax logit,
the summed entropy of the query rows' distributions and their summed mass on the first position (the
attention sink). Plain tensor math, kept apart from the callback
that decides when it runs (tests/training/callbacks/test_attention_oracle.py checks the logged values
against attention recomputed in plain torch).
"""

from __future__ import annotations

import math

import torch

from gptlab.model.attention import softcap

SCORES_PER_CHUNK = 1 << 24  # attention scores materialised at once (64 MiB of float32)


def attention_stats(
    q: torch.Tensor,
    k: torch.Tensor,
    scale: float | None = None,
    cap: float | None = None,
    mask: torch.Tensor | None = None,
    chunks: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor, int, torch.Tensor, int]:
    """(max logit, Σ entropy over query rows, number of rows, Σ sink, number of sink rows) of the
    layer's attention with (B, H, T, Dh) queries and keys: logits q·k·scale (None: 1/√Dh, SDPA's;
    μP's model passes its own), soft-capped c·tanh(·/c) when `cap` is given (the logits the softmax
    sees, so their max is at most c), over the pairs the layer attends: `mask` (bool, True = attend,
    (T, T) or (B, 1, T, T): a sliding window, documents; model/masks.py), key ≤ query when None.
    Entropy -Σ p log p of each row's softmax (hidden pairs have p = 0, and entr(0) = 0); sink: each
    row's p on key 0, over the rows t >= 1 (row 0 can attend to nothing else; 0 where the mask hides
    key 0). One score tensor per chunk of sequences. Keys with fewer heads than the queries
    (grouped-query: query head h reads key head h // (H / H_kv)) are broadcast over their group, so
    the statistics stay per query head, the same rows as multi-head attention's.

    `chunks` (the planner's fake step, planning.step): only the first `chunks` chunks. From the second
    chunk on, each allocates and frees what the second did (the previous chunk's scores and
    probabilities are alive while the next ones are made; a short last chunk makes less), so two
    reach the memory peak of all of them at the cost of two; the statistics then cover those rows
    only. None: every row, as a run needs."""
    B, H, T, D = q.shape
    if k.shape[1] != H:  # (B, H_kv, group, T, Dh) against (B, H_kv, 1, T, Dh): no copy of k
        q, k = q.reshape(B, k.shape[1], H // k.shape[1], T, D), k.unsqueeze(2)
    scale = D**-0.5 if scale is None else scale
    if mask is None:
        mask = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()
    hidden = ~mask
    if hidden.dim() == 4 and q.dim() == 5:  # (B, 1, T, T) against the grouped (B, H_kv, group, T, T)
        hidden = hidden.unsqueeze(2)
    top = torch.full((), -math.inf, device=q.device)
    ent = torch.zeros((), dtype=torch.float64, device=q.device)
    sink = torch.zeros((), dtype=torch.float64, device=q.device)
    step = max(1, SCORES_PER_CHUNK // (H * T * T))
    for b in range(0, B, step)[:chunks]:
        s = (q[b : b + step].float() * scale) @ k[b : b + step].float().transpose(-1, -2)
        s = s if cap is None else softcap(s, cap)
        s.masked_fill_(hidden if hidden.dim() == 2 else hidden[b : b + step], -math.inf)
        top = torch.maximum(top, s.amax())
        p = torch.softmax(s, dim=-1)
        ent += torch.special.entr(p).sum(dtype=torch.float64)
        sink += p[..., 1:, 0].sum(dtype=torch.float64)
    return top, ent, B * H * T, sink, B * H * (T - 1)
