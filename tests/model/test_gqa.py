"""Grouped-query and multi-query attention (model.n_kv_head) against attention written here in plain
torch: K and V projected to n_kv_head heads, each repeated for its n_head/n_kv_head query heads
(query head h reads key/value head h // group), then softmax(q·kᵀ/√d_h + causal mask)·v."""

from __future__ import annotations

import math

import pytest
import torch

from gptlab.compose import compose_config
from gptlab.model import GPT, GPTConfig
from gptlab.model.attention import CausalSelfAttention


def plain_attention(attn: CausalSelfAttention, x: torch.Tensor, n_head: int, n_kv_head: int) -> torch.Tensor:
    """The attention block from its weights, with autograd through them: no SDPA, no enable_gqa."""
    B, T, C = x.shape
    D = C // n_head
    q = (x @ attn.q_proj.weight.T).view(B, T, n_head, D).transpose(1, 2)
    k = (x @ attn.k_proj.weight.T).view(B, T, n_kv_head, D).transpose(1, 2)
    v = (x @ attn.v_proj.weight.T).view(B, T, n_kv_head, D).transpose(1, 2)
    # key/value head j serves query heads j·group ... (j+1)·group - 1
    k, v = k.repeat_interleave(n_head // n_kv_head, dim=1), v.repeat_interleave(n_head // n_kv_head, dim=1)
    s = q @ k.transpose(-1, -2) / math.sqrt(D)
    s = s.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
    y = torch.softmax(s, dim=-1) @ v
    return y.transpose(1, 2).reshape(B, T, C) @ attn.out_proj.weight.T


@pytest.mark.parametrize("n_kv_head", [8, 4, 2, 1], ids=["mha", "gqa4", "gqa2", "mqa"])
def test_attention_equals_plain_torch_with_repeated_kv_heads(n_kv_head: int) -> None:
    """Forward and every gradient (input, q/k/v/out weights) in float64, against the oracle above."""
    torch.manual_seed(0)
    cfg = GPTConfig(n_head=8, n_kv_head=n_kv_head, n_embd=64, pos_emb="learned", block_size=16)
    attn = CausalSelfAttention(cfg).double().eval()
    assert attn.k_proj.weight.shape == attn.v_proj.weight.shape == (n_kv_head * 8, 64)
    x = torch.randn(3, 16, 64, dtype=torch.float64, requires_grad=True)
    g = torch.randn(3, 16, 64, dtype=torch.float64)  # a random cotangent: every output entry matters
    weights = [attn.q_proj.weight, attn.k_proj.weight, attn.v_proj.weight, attn.out_proj.weight]
    got = attn(x, None)
    got_grads = torch.autograd.grad(got, [x, *weights], g)
    want = plain_attention(attn, x, 8, n_kv_head)
    want_grads = torch.autograd.grad(want, [x, *weights], g)
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10)
    for name, a, b in zip(["x", "q", "k", "v", "out"], got_grads, want_grads, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10, msg=lambda m, n=name: f"grad {n}: {m}")


def test_null_n_kv_head_is_multi_head() -> None:
    cfg = GPTConfig(n_head=4, n_embd=32)
    assert cfg.n_kv_head is None and cfg.kv_heads == 4
    assert CausalSelfAttention(cfg).k_proj.weight.shape == (32, 32)


@pytest.mark.parametrize("bad", [0, -2, 3, 5, True, 2.0, "2"])
def test_n_kv_head_must_divide_n_head_and_be_at_least_one(bad: object) -> None:
    with pytest.raises(
        ValueError, match=r"^model\.n_kv_head=.* is not accepted with model\.n_head=4; give null"
    ):
        GPTConfig(n_head=4, n_embd=32, n_kv_head=bad)  # type: ignore[arg-type]


def test_attention_group_sets_n_kv_head() -> None:
    assert compose_config([]).model.n_kv_head is None
    assert compose_config(["model/attention=mha"]).model.n_kv_head is None
    assert compose_config(["model/attention=gqa"]).model.n_kv_head == 2
    assert compose_config(["model/attention=mqa"]).model.n_kv_head == 1
    assert compose_config(["model=llama_7b", "model/attention=gqa", "model.n_kv_head=8"]).model.n_kv_head == 8


def test_gqa_model_trains_a_step_and_compiles() -> None:
    """The whole model with RoPE and QK-norm: a backward reaches the smaller K/V, and
    torch.compile(fullgraph=True) takes enable_gqa without a graph break."""
    torch.manual_seed(0)
    cfg = GPTConfig(n_layer=2, n_head=4, n_kv_head=2, n_embd=32, block_size=16, vocab_size=64, qk_norm=True)
    model = GPT(cfg)
    idx = torch.randint(0, 64, (2, 16))
    eager = model(idx)
    eager.square().mean().backward()
    assert model.blocks[0].attn.k_proj.weight.grad is not None
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
    torch.testing.assert_close(compiled(idx), eager, rtol=1e-5, atol=1e-5)
