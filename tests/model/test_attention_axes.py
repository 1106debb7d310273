"""The attention axes of issue 46 against formulas written here in plain torch, in float64: the
output gate (Qiu et al. 2025), partial RoPE, NoPE layers, no positions, and Gemma 2's soft caps on
the attention and output logits; forward and gradients."""

from __future__ import annotations

import math

import pytest
import torch

from gptlab.model import GPT, GPTConfig
from gptlab.model.attention import CausalSelfAttention

SMALL = {"n_layer": 4, "n_head": 4, "n_embd": 32, "block_size": 16, "vocab_size": 64}


def plain_attention(attn: CausalSelfAttention, x: torch.Tensor, cfg: GPTConfig, rot: bool) -> torch.Tensor:
    """The attention block from its weights: q/k/v, RoPE on the first rope_fraction·d_h dims (pairs
    (j, j + r/2), angle t·θ^(-2j/r)), logits q·kᵀ/√d_h capped c·tanh(·/c), causal softmax, the gate
    σ(x·W_gᵀ) per head or channel on each head's output, then W_O."""
    B, T, C = x.shape
    H, D, Hkv = cfg.n_head, cfg.head_dim, cfg.kv_heads
    q = (x @ attn.q_proj.weight.T).view(B, T, H, D).transpose(1, 2)
    k = (x @ attn.k_proj.weight.T).view(B, T, Hkv, D).transpose(1, 2).repeat_interleave(H // Hkv, 1)
    v = (x @ attn.v_proj.weight.T).view(B, T, Hkv, D).transpose(1, 2).repeat_interleave(H // Hkv, 1)
    if rot:
        r = round(cfg.rope_fraction * D)
        ang = torch.arange(T, dtype=torch.float64)[:, None] * cfg.rope_theta ** (
            -torch.arange(0, r // 2, dtype=torch.float64) * 2 / r
        )
        cos, sin = ang.cos(), ang.sin()

        def rope(z: torch.Tensor) -> torch.Tensor:
            a, b = z[..., : r // 2], z[..., r // 2 : r]
            return torch.cat([a * cos - b * sin, b * cos + a * sin, z[..., r:]], dim=-1)

        q, k = rope(q), rope(k)
    s = q @ k.transpose(-1, -2) / math.sqrt(D)
    if cfg.attn_softcap is not None:
        s = cfg.attn_softcap * torch.tanh(s / cfg.attn_softcap)
    s = s.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
    y = torch.softmax(s, dim=-1) @ v  # (B, H, T, D)
    if cfg.attn_gate != "none":
        g = torch.sigmoid(x @ attn.gate_proj.weight.T).view(B, T, H, -1).transpose(1, 2)
        y = y * g
    return y.transpose(1, 2).reshape(B, T, C) @ attn.out_proj.weight.T


CASES = {
    "gate-head": {"attn_gate": "headwise"},
    "gate-elem-gqa": {"attn_gate": "elementwise", "n_kv_head": 2},
    "partial-rope": {"rope_fraction": 0.25},
    "softcap-mqa": {"attn_softcap": 1.5, "n_kv_head": 1},
    "all": {"attn_gate": "elementwise", "rope_fraction": 0.5, "attn_softcap": 2.0},
}


@pytest.mark.parametrize("extra", CASES.values(), ids=CASES.keys())
def test_attention_equals_plain_torch(extra: dict) -> None:
    """Forward and every gradient (input and each weight) against the oracle, q and k scaled x6 so
    that the logits (order 10) reach well into the cap."""
    torch.manual_seed(0)
    cfg = GPTConfig(**SMALL, **extra)
    attn = CausalSelfAttention(cfg).double().eval()
    with torch.no_grad():
        attn.q_proj.weight.mul_(6)
        attn.k_proj.weight.mul_(6)
        if attn.gate_proj is not None:
            attn.gate_proj.weight.mul_(20)  # gates spread over (0, 1), not all near 1/2
    x = torch.randn(2, 16, 32, dtype=torch.float64, requires_grad=True)
    gout = torch.randn(2, 16, 32, dtype=torch.float64)
    weights = [p for _, p in sorted(attn.named_parameters())]
    rope = None
    if cfg.pos_emb == "rope":
        model = GPT(cfg).double()
        rope = (model.rope_cos, model.rope_sin)
    got = attn(x, rope)
    want = plain_attention(attn, x, cfg, rot=rope is not None)
    tol = 1e-5  # the model's RoPE tables are float32 (angles t·θ^(-2j/r) to ~1e-7 relative)
    torch.testing.assert_close(got, want, rtol=tol, atol=tol)
    for a, b, name in zip(
        torch.autograd.grad(got, [x, *weights], gout),
        torch.autograd.grad(want, [x, *weights], gout),
        ["x", *sorted(n for n, _ in attn.named_parameters())],
        strict=True,
    ):
        torch.testing.assert_close(a, b, rtol=tol, atol=tol, msg=lambda m, n=name: f"grad {n}: {m}")


def test_gate_shapes_and_sigmoid_of_zero_halves_the_branch() -> None:
    """W_g is (n_head, d) headwise, (d, d) elementwise; with W_g = 0 every gate is σ(0) = 1/2, so
    the gated block's output is half the ungated one's (same other weights)."""
    torch.manual_seed(1)
    head = CausalSelfAttention(GPTConfig(**SMALL, attn_gate="headwise"))
    elem = CausalSelfAttention(GPTConfig(**SMALL, attn_gate="elementwise"))
    assert head.gate_proj.weight.shape == (4, 32) and elem.gate_proj.weight.shape == (32, 32)
    plain = CausalSelfAttention(GPTConfig(**SMALL))
    plain.load_state_dict({k: v for k, v in head.state_dict().items() if "gate" not in k})
    with torch.no_grad():
        head.gate_proj.weight.zero_()
    x = torch.randn(2, 8, 32)
    torch.testing.assert_close(head(x, None), plain(x, None) / 2)


@pytest.mark.parametrize("every", [1, 2, 3])
def test_nope_layers_are_those_with_i_plus_1_divisible_by_k(every: int) -> None:
    """The whole model equals its blocks run by hand with RoPE on layer i unless (i+1) % k == 0
    (k = 2: layers 1 and 3 of 0..3 are NoPE)."""
    torch.manual_seed(2)
    model = GPT(GPTConfig(**SMALL, nope_every=every)).double()
    idx = torch.randint(0, 64, (2, 16))
    rope = (model.rope_cos, model.rope_sin)
    x = model.tok_emb(idx)
    for i, block in enumerate(model.blocks):
        x = block(x, None if (i + 1) % every == 0 else rope)
    want = model.lm_head(model.final_norm(x))
    torch.testing.assert_close(model(idx), want, rtol=0, atol=0)
    assert [model.cfg.rotates(i) for i in range(4)] == [(i + 1) % every != 0 for i in range(4)]


def test_pos_emb_none_has_no_position_parameters_or_tables() -> None:
    """NoPE: no pos_emb table, no RoPE buffers; only the causal mask tells positions apart, so
    the first position's output does not depend on a shift of the others."""
    torch.manual_seed(3)
    model = GPT(GPTConfig(**SMALL, pos_emb="none"))
    assert model.pos_emb is None and not hasattr(model, "rope_cos")
    rope = GPT(GPTConfig(**SMALL))
    assert rope.num_params() == model.num_params()
    idx = torch.randint(0, 64, (1, 8))
    # a repeated token: without positions each of its copies sees the same multiset → same output
    same = torch.full((1, 8), 5)
    out = model(same)
    torch.testing.assert_close(out[0, 0], out[0, 7], rtol=1e-5, atol=1e-5)
    learned = GPT(GPTConfig(**SMALL, pos_emb="learned"))  # a position table tells them apart
    assert not torch.allclose(learned(same)[0, 0], learned(same)[0, 7], atol=1e-3)
    assert model(idx).shape == (1, 8, 64)


def test_logit_softcap_is_c_tanh_of_the_uncapped_logits() -> None:
    """Same weights with and without model.logit_softcap: capped = c·tanh(uncapped / c), |·| < c;
    the logits scaled up x40 so that many saturate."""
    torch.manual_seed(4)
    capped = GPT(GPTConfig(**SMALL, logit_softcap=3.0)).double()
    plain = GPT(GPTConfig(**SMALL)).double()
    plain.load_state_dict(capped.state_dict())
    with torch.no_grad():
        for m in (capped, plain):
            m.tok_emb.weight.mul_(40)
    idx = torch.randint(0, 64, (2, 16))
    raw = plain(idx)
    assert raw.abs().max() > 10
    got = capped(idx)
    torch.testing.assert_close(got, 3.0 * torch.tanh(raw / 3.0), rtol=1e-12, atol=1e-12)
    assert got.abs().max() < 3.0
