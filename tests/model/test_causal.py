"""SDPA with is_causal: logits at a position depend on that position and earlier ones only."""

from __future__ import annotations

import pytest
import torch

from gptlab.model import GPT, GPTConfig

T, V = 16, 64


@pytest.mark.parametrize("placement", ["pre", "post", "sandwich", "deepnorm"])
@pytest.mark.parametrize("pos_emb", ["rope", "learned"])
def test_future_tokens_do_not_change_earlier_logits(placement, pos_emb):
    torch.manual_seed(0)
    cfg = GPTConfig(
        vocab_size=V,
        block_size=T,
        n_layer=2,
        n_head=4,
        n_embd=32,
        norm_placement=placement,
        pos_emb=pos_emb,
        depth_scaled_init="none" if placement == "deepnorm" else "global",
    )
    model = GPT(cfg).eval()
    idx = torch.randint(0, V, (2, T))
    t = 9
    changed = idx.clone()
    changed[:, t] = (idx[:, t] + 1) % V
    with torch.no_grad():
        a, b = model(idx), model(changed)
    assert torch.equal(a[:, :t], b[:, :t])  # bit-identical: nothing flows backwards in time
    assert not torch.allclose(a[:, t:], b[:, t:])  # and the change is visible from t on
    # later positions see it through attention, not only position t itself
    assert not torch.allclose(a[:, t + 1 :], b[:, t + 1 :])


@pytest.mark.parametrize("pos_emb", ["rope", "learned"])
def test_attention_matches_a_reference(pos_emb):
    """q/k/v, RoPE on q and k (half-split pairs), causal softmax(q·k/sqrt(d_head)) v, then W_O."""
    torch.manual_seed(0)
    cfg = GPTConfig(vocab_size=V, block_size=T, n_layer=1, n_head=4, n_embd=32, pos_emb=pos_emb)
    model = GPT(cfg)
    attn = model.blocks[0].attn
    x = torch.randn(2, T, 32)
    H, Dh = 4, 8

    def heads(w):
        return (x @ w.T).view(2, T, H, Dh).transpose(1, 2)

    q, k, v = heads(attn.q_proj.weight), heads(attn.k_proj.weight), heads(attn.v_proj.weight)
    if pos_emb == "rope":
        pos = torch.arange(T, dtype=torch.float64)[:, None]
        freq = 10000.0 ** (-torch.arange(0, Dh, 2, dtype=torch.float64) / Dh)
        ang = (pos * freq).float()  # (T, Dh/2): pair i of (x_i, x_{i+Dh/2}) turns by pos·θ_i
        cos, sin = ang.cos(), ang.sin()

        def rot(z):
            a, b = z[..., : Dh // 2], z[..., Dh // 2 :]
            return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)

        q, k = rot(q), rot(k)
    scores = (q @ k.transpose(-1, -2)) / Dh**0.5
    scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    y = (scores.softmax(-1) @ v).transpose(1, 2).reshape(2, T, 32) @ attn.out_proj.weight.T
    rope = (model.rope_cos, model.rope_sin) if pos_emb == "rope" else None
    torch.testing.assert_close(attn(x, rope), y, rtol=1e-4, atol=1e-5)
