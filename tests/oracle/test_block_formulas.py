"""Block and GPT outputs against their formulas, written out here from the papers.

Oracle: a few lines of plain tensor algebra per placement, reading the module's own weights (q/k/v/out
projections, FFN projections, norm gains and biases) and nothing else from gptlab: attention with an
explicit softmax, causal mask and 1/sqrt(d_head) scale; RoPE from its formula (half-split pairs,
theta from the config); RMSNorm and LayerNorm from theirs; DeepNet's α = (2L)^(1/4) (Wang et al.
2022). Every parameter is randomized (norm gains and biases too, which init to 1 and 0), so a norm
dropped, swapped or moved, or α put on the wrong term, changes the output by O(1). Float64, 1e-6.
"""

from __future__ import annotations

import math

import pytest
import torch

from gptlab.model import GPT, GPTConfig
from gptlab.model.block import Block
from gptlab.model.ffn import FeedForward

B, T, D, H, L = 2, 8, 32, 4, 3
DH = D // H
EPS = 1e-3  # large enough that a norm which ignores the configured eps is visible
THETA = 500.0  # not torch's or the config's default: a RoPE that ignores rope_theta is visible
TOL = dict(rtol=1e-6, atol=1e-6)


def config(**kw) -> GPTConfig:
    base = dict(
        vocab_size=48,
        block_size=T,
        n_layer=L,
        n_head=H,
        n_embd=D,
        norm_eps=EPS,
        rope_theta=THETA,
        ffn_hidden=48,
        dropout=0.0,
    )
    base.update(kw)
    if base.get("norm_placement") == "deepnorm":
        base["depth_scaled_init"] = "none"
    return GPTConfig(**base)


@torch.no_grad()
def randomize(module: torch.nn.Module, seed: int = 0) -> None:
    """Every parameter O(1)-random: matrices ~ N(0, 1/fan_in), gains 1 + N(0, 0.3²), biases N(0, 0.3²)."""
    gen = torch.Generator().manual_seed(seed)
    for p in module.parameters():
        r = torch.randn(p.shape, generator=gen, dtype=torch.float64)
        if p.dim() >= 2:
            p.copy_(r / math.sqrt(p.shape[1]))
        elif p.dim() == 1 and torch.all(p == 1):  # a gain
            p.copy_(1.0 + 0.3 * r)
        else:  # a bias
            p.copy_(0.3 * r)


# ---- the formulas ------------------------------------------------------------------------------
def linear(x, lin):
    y = x @ lin.weight.T
    return y if lin.bias is None else y + lin.bias


def rms_norm(x, norm, eps):
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * norm.weight


def layer_norm(x, norm, eps):
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)  # biased variance, as in Ba et al. 2016
    y = (x - mu) / torch.sqrt(var + eps) * norm.weight
    return y if norm.bias is None else y + norm.bias


def norm_f(cfg):
    return {"rmsnorm": rms_norm, "layernorm": layer_norm}[cfg.norm]


def rope_angles(length, head_dim, theta):
    """(length, head_dim/2): pair i turns by pos · theta^(-2i/head_dim) (Su et al. 2021)."""
    pos = torch.arange(length, dtype=torch.float64)[:, None]
    inv = theta ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    return pos * inv


def rotate(z, ang):
    """Half-split layout (Llama): pair i is (z_i, z_{i + Dh/2}), rotated counter-clockwise."""
    a, b = z[..., : z.shape[-1] // 2], z[..., z.shape[-1] // 2 :]
    c, s = ang.cos(), ang.sin()
    return torch.cat([a * c - b * s, a * s + b * c], dim=-1)


def attention(x, attn, ang):
    Bx, Tx, _ = x.shape

    def heads(lin):
        return linear(x, lin).view(Bx, Tx, H, DH).transpose(1, 2)

    q, k, v = heads(attn.q_proj), heads(attn.k_proj), heads(attn.v_proj)
    if ang is not None:
        q, k = rotate(q, ang[:Tx]), rotate(k, ang[:Tx])
    scores = q @ k.transpose(-1, -2) / math.sqrt(DH)
    future = torch.ones(Tx, Tx, dtype=torch.bool).triu(1)  # key j > query i
    scores = scores.masked_fill(future, float("-inf"))
    p = scores.exp() / scores.exp().sum(-1, keepdim=True)  # softmax, explicitly
    y = (p @ v).transpose(1, 2).reshape(Bx, Tx, D)
    return linear(y, attn.out_proj)


def gelu(z):
    return 0.5 * z * (1.0 + torch.erf(z / math.sqrt(2.0)))


ACT = {
    "swiglu": lambda z: z * torch.sigmoid(z),  # SiLU (Shazeer 2020)
    "geglu": gelu,
    "reglu": lambda z: z.clamp(min=0),
    "gelu": gelu,
    "gelu_tanh": lambda z: 0.5 * z * (1 + torch.tanh(math.sqrt(2 / math.pi) * (z + 0.044715 * z**3))),
    "relu": lambda z: z.clamp(min=0),
}


def ffn(x, f, kind):
    if kind in ("swiglu", "geglu", "reglu"):
        return linear(ACT[kind](linear(x, f.gate_proj)) * linear(x, f.up_proj), f.down_proj)
    return linear(ACT[kind](linear(x, f.up_proj)), f.down_proj)


def block_formula(blk, x, cfg, ang):
    N = norm_f(cfg)
    n1 = lambda z: N(z, blk.attn_norm, cfg.norm_eps)  # noqa: E731
    n2 = lambda z: N(z, blk.ffn_norm, cfg.norm_eps)  # noqa: E731
    A = lambda z: attention(z, blk.attn, ang)  # noqa: E731
    F_ = lambda z: ffn(z, blk.ffn, cfg.ffn)  # noqa: E731
    p = cfg.norm_placement
    if p == "pre":  # x + f(LN(x))
        h = x + A(n1(x))
        return h + F_(n2(h))
    if p == "post":  # LN(x + f(x))
        h = n1(x + A(x))
        return n2(h + F_(h))
    if p == "sandwich":  # x + LN_out(f(LN_in(x)))
        n3 = lambda z: N(z, blk.attn_out_norm, cfg.norm_eps)  # noqa: E731
        n4 = lambda z: N(z, blk.ffn_out_norm, cfg.norm_eps)  # noqa: E731
        h = x + n3(A(n1(x)))
        return h + n4(F_(n2(h)))
    assert p == "deepnorm"  # LN(α·x + f(x)), α = (2N)^(1/4) for an N-layer decoder
    alpha = (2 * cfg.n_layer) ** 0.25
    h = n1(alpha * x + A(x))
    return n2(alpha * h + F_(h))


# ---- the tests ---------------------------------------------------------------------------------
PLACEMENTS = ["pre", "post", "sandwich", "deepnorm"]


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("ffn_kind", ["swiglu", "gelu"])
@pytest.mark.parametrize("norm", ["rmsnorm", "layernorm"])
@pytest.mark.parametrize("placement", PLACEMENTS)
def test_block_matches_its_formula(placement, norm, ffn_kind, bias):
    cfg = config(norm_placement=placement, norm=norm, ffn=ffn_kind, bias=bias)
    blk = Block(cfg).double().eval()
    randomize(blk)
    gen = torch.Generator().manual_seed(1)
    # stream scale 0.1: mean(x²) ~ 1e-2, so an eps of 1e-3 moves a norm's output by ~5%
    x = 0.1 * torch.randn(B, T, D, generator=gen, dtype=torch.float64)
    ang = rope_angles(T, DH, THETA)
    # the block takes cos/sin tables in the half-split layout: each pair's angle twice
    full = torch.cat([ang, ang], dim=-1)
    with torch.no_grad():
        got = blk(x, (full.cos(), full.sin()))
        want = block_formula(blk, x, cfg, ang)
    torch.testing.assert_close(got, want, **TOL)


@pytest.mark.parametrize("kind", ["swiglu", "geglu", "reglu", "gelu", "gelu_tanh", "relu"])
def test_ffn_matches_its_formula(kind):
    cfg = config(ffn=kind, bias=True)
    f = FeedForward(cfg).double()
    randomize(f)
    x = torch.randn(B, T, D, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    with torch.no_grad():
        torch.testing.assert_close(f(x), ffn(x, f, kind), **TOL)


def test_rope_tables_follow_theta_from_the_config():
    """The model's cos/sin buffers (fp32) against the formula; float32 angles: 1e-5 absolute."""
    cfg = config(block_size=32)
    model = GPT(cfg)
    ang = rope_angles(32, DH, THETA)
    full = torch.cat([ang, ang], dim=-1)
    torch.testing.assert_close(model.rope_cos.double(), full.cos(), rtol=0, atol=1e-5)
    torch.testing.assert_close(model.rope_sin.double(), full.sin(), rtol=0, atol=1e-5)


def test_deepnorm_alpha_is_paper_value():
    for n_layer in (1, 3, 12):
        blk = Block(config(n_layer=n_layer, norm_placement="deepnorm"))
        assert blk.alpha == pytest.approx((2 * n_layer) ** 0.25, rel=1e-12)


def gpt_formula(model, idx, cfg, ang):
    E = model.tok_emb.weight
    x = E[idx]
    if cfg.pos_emb == "learned":
        x = x + model.pos_emb.weight[: idx.shape[1]]
    for blk in model.blocks:
        x = block_formula(blk, x, cfg, ang if cfg.pos_emb == "rope" else None)
    if cfg.norm_placement in ("pre", "sandwich"):  # post and deepnorm end on a norm already
        x = norm_f(cfg)(x, model.final_norm, cfg.norm_eps)
    head = E if cfg.tie_embeddings else model.lm_head.weight
    return x @ head.T


@pytest.mark.parametrize(
    "placement,norm,ffn_kind,pos_emb,tied",
    [
        ("pre", "rmsnorm", "swiglu", "rope", True),
        ("post", "layernorm", "gelu", "rope", True),
        ("sandwich", "rmsnorm", "gelu", "rope", True),
        ("deepnorm", "layernorm", "swiglu", "rope", True),
        ("pre", "layernorm", "gelu", "learned", False),
    ],
)
def test_gpt_forward_matches_the_formula_chain(placement, norm, ffn_kind, pos_emb, tied):
    cfg = config(norm_placement=placement, norm=norm, ffn=ffn_kind, pos_emb=pos_emb, tie_embeddings=tied)
    model = GPT(cfg).double().eval()
    randomize(model)
    with torch.no_grad():
        model.tok_emb.weight.mul_(0.1 * math.sqrt(D))  # embeddings ~ N(0, 0.1²): eps stays visible
    idx = torch.randint(0, cfg.vocab_size, (B, T), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        got = model(idx)
        want = gpt_formula(model, idx, cfg, rope_angles(T, DH, THETA))
    # the model's RoPE tables are float32 (checked separately above), which costs up to ~3e-7 here
    torch.testing.assert_close(got, want, **TOL)
    if tied:
        assert model.lm_head.weight is model.tok_emb.weight
