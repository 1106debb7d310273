"""The log step's cheaper computations against plain float64 torch: the attention statistics (query
rows in blocks, keys after a block skipped, entropy from log Z), the output-logit moments (row sums
and row norms, no squared copy) and the update norms (only the block parameters copied).

No training: each piece gets tensors made here, and the reference is written out from the
definitions (softmax, -Σ p log p, Σ x², ‖W_after − W_before‖) in float64.
"""

from __future__ import annotations

import math

import pytest
import torch

from gptlab.model import GPT, GPTConfig
from gptlab.model.masks import causal_window
from gptlab.training.callbacks.attention_stats import attention_stats, row_blocks
from gptlab.training.callbacks.telemetry import LayerTelemetry
from gptlab.training.callbacks.telemetry_metrics import GroupIndex
from gptlab.training.module import logit_moments


def attention_reference(
    q: torch.Tensor, k: torch.Tensor, scale: float, cap: float | None, seen: torch.Tensor
) -> tuple[float, float, float]:
    """(max logit, Σ row entropies, Σ sink mass over rows t >= 1) over the pairs `seen` (B, 1, T, T),
    every query head against its key head (h // group), all T×T scores at once, float64."""
    B, H, T, _ = q.shape
    k = k.double().repeat_interleave(H // k.shape[1], dim=1)
    s = (q.double() @ k.transpose(-1, -2)) * scale
    if cap is not None:
        s = cap * torch.tanh(s / cap)
    s = s.masked_fill(~seen, -math.inf)
    p = torch.softmax(s, dim=-1)
    plogp = torch.where(seen, p * torch.log(p.clamp_min(1e-300)), torch.zeros(()))
    return float(s.max()), float(-plogp.sum()), float(p[:, :, 1:, 0].sum())


def documents_mask(B: int, T: int, seed: int) -> torch.Tensor:
    """(B, 1, T, T): causal, and within one of a few documents of random lengths per sequence."""
    g = torch.Generator().manual_seed(seed)
    doc = torch.randint(0, 2, (B, T), generator=g).cumsum(dim=1)  # a new document at each 1
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    return ((doc[:, :, None] == doc[:, None, :]) & causal)[:, None]


@pytest.mark.parametrize("T", [1, 2, 9, 37])
@pytest.mark.parametrize(
    ("heads", "cap", "mask"),
    [((4, 4), None, None), ((4, 2), 3.0, "window"), ((4, 1), None, "documents")],
    ids=["mha-causal", "gqa-softcap-window", "mqa-documents"],
)
def test_attention_stats_equal_the_full_softmax(
    T: int, heads: tuple[int, int], cap: float | None, mask: str | None
) -> None:
    """Row blocks (T=37: 8 blocks of 4-5 rows, keys up to each block's last row) and the entropy as
    log Z − Σ e·(s − m)/Z give what the full T×T softmax gives, to float32 rounding."""
    B, (H, Hkv), D = 3, heads, 8
    g = torch.Generator().manual_seed(T)
    # logits of order 1-20: peaked rows (entropy near 0) beside flat ones
    q, k = torch.randn(B, H, T, D, generator=g) * 3, torch.randn(B, Hkv, T, D, generator=g) * 3
    if mask == "window":
        m = causal_window(T, 5, "cpu")
        seen = m[None, None].expand(B, 1, T, T)
    elif mask == "documents":
        m = seen = documents_mask(B, T, T)
    else:
        m, seen = None, torch.ones(T, T, dtype=torch.bool).tril()[None, None].expand(B, 1, T, T)
    top, ent, rows, sink, sink_rows = attention_stats(q, k, 0.3, cap, m)
    want_top, want_ent, want_sink = attention_reference(q, k, 0.3, cap, seen)
    assert (rows, sink_rows) == (B * H * T, B * H * (T - 1))
    assert float(top) == pytest.approx(want_top, rel=1e-6)
    assert float(ent) == pytest.approx(want_ent, rel=1e-5, abs=1e-6 * B * H * T)
    assert float(sink) == pytest.approx(want_sink, rel=1e-5, abs=1e-7)


def test_row_blocks_cover_every_row_once() -> None:
    for T in (1, 2, 7, 8, 9, 256):
        blocks = row_blocks(T)
        assert [r for r0, r1 in blocks for r in range(r0, r1)] == list(range(T)), T
        assert all(r1 > r0 for r0, r1 in blocks)


@pytest.mark.parametrize("shape", [(7, 3), (64, 5003)])
def test_logit_moments_equal_float64_sums(shape: tuple[int, int]) -> None:
    """Σ x, Σ x², max, Σ log Z and the counts, against float64 over every logit (a mean off 0, so
    that Σ x is not lost in cancellation and a wrong power shows)."""
    g = torch.Generator().manual_seed(0)
    flat = torch.randn(*shape, generator=g) * 4 + 0.7
    log_z = torch.logsumexp(flat, dim=-1)
    got = logit_moments(flat, log_z).tolist()
    x = flat.double()
    want = [float(x.sum()), float(x.pow(2).sum()), float(x.max()), float(log_z.double().sum())]
    assert got[:4] == pytest.approx(want, rel=1e-6)
    assert got[4:] == [float(flat.numel()), float(shape[0])]


def test_update_norms_copy_only_the_blocks_and_equal_the_difference() -> None:
    """weights_before copies the block parameters only (their updates are the logged ones); the
    per-block Σ ΔW² and every group's Σ W² after the update equal plain float64 sums, with the
    embedding, the untied head and the final norm moved too (their change must not leak in)."""
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=32, block_size=8, n_layer=3, n_head=2, n_embd=16, tie_embeddings=False))
    telemetry = LayerTelemetry(every=1, figures=False)
    telemetry.index = index = GroupIndex.of(model, torch.device("cpu"))
    names = dict(model.named_parameters())
    blocks = [n for n in names if n.startswith("blocks.")]
    before = telemetry.weights_before()
    assert len(before) == len(blocks) < len(names)
    old = {n: p.detach().double().clone() for n, p in names.items()}
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    param_sq, delta_sq = telemetry.update_sq(before)
    for b, row in zip(index.blocks, index.block_rows, strict=True):
        mine = [n for n in blocks if n.startswith(f"blocks.{int(b.split('_')[1])}.")]
        want = sum(float((names[n].detach().double() - old[n]).pow(2).sum()) for n in mine)
        assert float(delta_sq[row]) == pytest.approx(want, rel=1e-5), b
        want_w = sum(float(names[n].detach().double().pow(2).sum()) for n in mine)
        assert float(param_sq[row]) == pytest.approx(want_w, rel=1e-5), b
    total = sum(float(p.detach().double().pow(2).sum()) for p in names.values())
    assert float(param_sq[index.groups.index("total")]) == pytest.approx(total, rel=1e-5)


def test_attention_stats_under_autocast_stay_float32_after_the_scores() -> None:
    """Under bf16 autocast (a log step's forward of a bf16-mixed run) the scores' matmul runs in
    bf16; everything after it is float32, so the statistics are the float32 ones to bf16's rounding
    of the scores."""
    g = torch.Generator().manual_seed(1)
    q, k = torch.randn(2, 4, 24, 8, generator=g), torch.randn(2, 4, 24, 8, generator=g)
    want = attention_stats(q, k)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = attention_stats(q.bfloat16(), k.bfloat16())
    assert got[1].dtype == torch.float64 and got[0].dtype == torch.float32
    for a, b in ((got[0], want[0]), (got[1], want[1]), (got[3], want[3])):
        assert float(a) == pytest.approx(float(b), rel=2e-2)
