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
ROW_BLOCKS = 8  # query rows in this many blocks: block [r0, r1) scores keys [0, r1) only


def row_blocks(T: int) -> list[tuple[int, int]]:
    """[r0, r1) query-row blocks of a T-token window, at most ROW_BLOCKS, none empty. Every mask the
    model builds hides the keys after the query (causal, its window, its documents: model/masks.py),
    so block [r0, r1) needs the keys [0, r1) only: ~(1 + 1/ROW_BLOCKS)/2 of the T×T scores."""
    n = max(1, min(ROW_BLOCKS, T))
    bounds = [round(T * (i + 1) / n) for i in range(n)]
    return [(r0, r1) for r0, r1 in zip([0, *bounds[:-1]], bounds, strict=True) if r1 > r0]


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
    key 0). Keys with fewer heads than the queries (grouped-query: query head h reads key head
    h // (H / H_kv)) are broadcast over their group, so the statistics stay per query head, the same
    rows as multi-head attention's.

    Cost (a log step's largest on a CPU): scores per chunk of sequences and per block of query rows
    (`row_blocks`: no score of a key after the block's last row), and per row the entropy as
    log Z − Σ e·(s − m) / Z with e = exp(s − m), m the row's max, Z = Σ e: one exp per score, no
    elementwise log, no normalised copy (the same value as -Σ p log p up to float rounding).

    `chunks` (the planner's fake step, planning.step): only the first `chunks` chunks of sequences.
    From the second chunk on, each allocates and frees what the second did (it starts with the
    previous chunk's last row block's scores alive; a short last chunk makes less), so two reach
    the memory peak of all of them at the cost of two; the statistics then cover those rows only.
    None: every row, as a run needs."""
    B, H, T, D = q.shape
    if k.shape[1] != H:  # (B, H_kv, group, T, Dh) against (B, H_kv, 1, T, Dh): no copy of k
        q, k = q.reshape(B, k.shape[1], H // k.shape[1], T, D), k.unsqueeze(2)
    scale = D**-0.5 if scale is None else scale
    causal = mask is None
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
        qs, kb = q[b : b + step].float() * scale, k[b : b + step].float()
        hid = hidden if hidden.dim() == 2 else hidden[b : b + step]
        for r0, r1 in row_blocks(T):
            # causal: only the block's own keys [r0, r1) lie after some of its rows; a window's or
            # documents' mask hides pairs anywhere in [0, r1)
            first = r0 if causal else 0
            off = hid[..., r0:r1, first:r1]
            # float32 from here on (under CUDA autocast the matmul gives bf16, its exp float32)
            s = (qs[..., r0:r1, :] @ kb[..., :r1, :].transpose(-1, -2)).float()
            s = s if cap is None else softcap(s, cap)
            s[..., first:].masked_fill_(off, -math.inf)
            m = s.amax(dim=-1, keepdim=True)
            top = torch.maximum(top, m.max())
            s.sub_(m)  # s − m: ≤ 0 where attended, -inf where hidden
            e = s.exp()
            z = e.sum(dim=-1)
            s[..., first:].masked_fill_(off, 0.0)  # e = 0 there: 0·0, not 0·(-inf)
            ent += (z.log() - torch.linalg.vecdot(e, s) / z).sum(dtype=torch.float64)
            lo = max(r0, 1)  # the sink's rows t >= 1
            if r1 > lo:
                sink += (e[..., lo - r0 :, 0] / z[..., lo - r0 :]).sum(dtype=torch.float64)
    return top, ent, B * H * T, sink, B * H * (T - 1)
