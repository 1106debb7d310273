"""The attention axes of issue 46 with the rest: bad inputs refused in one line, μP's rule for the
gate, compile without a graph break, activation checkpointing, FLOPs against FlopCounterMode and
the parameter report's count by formula."""

from __future__ import annotations

import pytest
import torch
from torch.nn.attention import SDPBackend

from gptlab.analysis import params
from gptlab.config import OptimConfig
from gptlab.model import GPT, GPTConfig
from gptlab.training.optim import build_adamw
from tests.model.test_flops import SHAPE, counted_flops_per_token

SMALL = {"n_layer": 2, "n_head": 4, "n_embd": 32, "block_size": 16, "vocab_size": 64}

BAD = [
    ({"rope_fraction": 0.0}, "model.rope_fraction=0.0 is not accepted; give a number in (0, 1]"),
    ({"rope_fraction": 1.5}, "model.rope_fraction=1.5 is not accepted; give a number in (0, 1]"),
    (
        {"rope_fraction": 0.3},
        "model.rope_fraction=0.3 of d_head=8 is not an even whole number of dimensions; accepted: a "
        "fraction in (0, 1] with rope_fraction·d_head even and >= 2",
    ),
    ({"attn_softcap": 0.0}, "model.attn_softcap=0.0 must be a positive finite number or null (off)"),
    ({"logit_softcap": -30}, "model.logit_softcap=-30 must be a positive finite number or null (off)"),
    (
        {"nope_every": 0},
        "model.nope_every=0 is not accepted; give null (RoPE in every layer) or an integer k >= 1 "
        "(layers i with (i+1) % k == 0 go without RoPE)",
    ),
    (
        {"attn_gate": "sigmoid"},
        "model.attn_gate='sigmoid' is not accepted; choose one of none, headwise, elementwise",
    ),
    (
        {"pos_emb": "none", "rope_fraction": 0.5},
        "model.rope_fraction=0.5 needs model.pos_emb=rope (it says where RoPE acts), got "
        "pos_emb='none'; accepted with it: rope_fraction=1.0",
    ),
    (
        {"pos_emb": "learned", "nope_every": 4},
        "model.nope_every=4 needs model.pos_emb=rope (it says where RoPE acts), got "
        "pos_emb='learned'; accepted with it: nope_every=None",
    ),
    (
        {"attn_gate": "headwise", "parametrization": "mup", "mup_base_width": 16},
        "model.attn_gate=headwise cannot be combined with model.parametrization=mup",
    ),
]


@pytest.mark.parametrize(("extra", "message"), BAD, ids=[str(e) for e, _ in BAD])
def test_bad_attention_inputs_name_the_field_and_what_is_accepted(extra: dict, message: str) -> None:
    with pytest.raises(ValueError) as err:
        GPTConfig(**SMALL, **extra)
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_elementwise_gate_under_mup_has_q_projs_rules() -> None:
    """W_g (d → d) is a hidden matrix of fan-in d: init σ·m^(-1/2) and Adam LR × 1/m, as q_proj."""
    cfg = GPTConfig(
        **SMALL | {"n_embd": 128}, attn_gate="elementwise", parametrization="mup", mup_base_width=16
    )
    torch.manual_seed(0)
    model = GPT(cfg)
    groups = {id(p): g for g in build_adamw(model, OptimConfig(), "cpu").param_groups for p in g["params"]}
    named = dict(model.named_parameters())
    for i in range(cfg.n_layer):
        q, g = named[f"blocks.{i}.attn.q_proj.weight"], named[f"blocks.{i}.attn.gate_proj.weight"]
        assert groups[id(g)]["lr"] == groups[id(q)]["lr"] == pytest.approx(OptimConfig().lr / 8)
        assert g.std().item() == pytest.approx(cfg.init_std / 8**0.5, rel=0.05)


EVERYTHING = {
    "attn_gate": "elementwise",
    "rope_fraction": 0.5,
    "nope_every": 2,
    "attn_softcap": 5.0,
    "logit_softcap": 10.0,
    "n_kv_head": 2,
    "qk_norm": True,
    "norm": "dyt",
}


def test_every_switch_together_compiles_without_a_graph_break() -> None:
    """GQA, QK-norm, DyT and all five switches: torch.compile(fullgraph=True) equals eager,
    forward and gradients."""
    torch.manual_seed(0)
    model = GPT(GPTConfig(**SMALL, **EVERYTHING))
    idx = torch.randint(0, 64, (2, 16))
    eager = model(idx)
    eager.square().mean().backward()
    want = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad(set_to_none=True)
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
    got = compiled(idx)
    got.square().mean().backward()
    torch.testing.assert_close(got, eager, rtol=1e-5, atol=1e-6)
    for n, p in model.named_parameters():
        torch.testing.assert_close(p.grad, want[n], rtol=1e-4, atol=1e-6, msg=lambda m, n=n: f"{n}: {m}")


def test_activation_checkpointing_keeps_the_gradients() -> None:
    torch.manual_seed(0)
    grads = []
    for mode in ("none", "full"):
        torch.manual_seed(0)
        model = GPT(GPTConfig(**SMALL, **EVERYTHING, activation_checkpointing=mode))
        model(torch.arange(32).view(2, 16) % 64).square().mean().backward()
        grads.append({n: p.grad for n, p in model.named_parameters()})
    for n, g in grads[0].items():
        assert torch.equal(grads[1][n], g), n


@pytest.mark.parametrize(
    "extra", [{"attn_gate": "headwise"}, {"attn_gate": "elementwise", "attn_softcap": 30.0}]
)
def test_flop_formula_counts_the_gate_and_the_explicit_path(extra: dict) -> None:
    """W_g's d·n_head (or d·d) weights a layer enter N, so 6·N counts the gate's matmul; the
    soft-capped path's q·kᵀ and p·v are the two matmuls of 12·L·T·d. FlopCounterMode agrees within
    1% (what it does not count: norm gains in N, and the sigmoid, tanh and gate product)."""
    model = GPT(GPTConfig.from_dict({**SHAPE, **extra}))
    plain = GPT(GPTConfig.from_dict(SHAPE))
    L, d, H = SHAPE["n_layer"], SHAPE["n_embd"], SHAPE["n_head"]
    width = H if extra["attn_gate"] == "headwise" else d
    assert model.flops_per_token() - plain.flops_per_token() == 6 * L * d * width
    counted = counted_flops_per_token(model, SDPBackend.MATH)
    assert counted < model.flops_per_token()
    assert counted == pytest.approx(model.flops_per_token(), rel=0.01)


@pytest.mark.parametrize(("gate", "width"), [("headwise", 4), ("elementwise", 32)])
def test_param_report_counts_the_gate_as_attention(gate: str, width: int) -> None:
    plain = params.param_report(GPTConfig(**SMALL))
    gated = params.param_report(GPTConfig(**SMALL, attn_gate=gate))
    assert gated.counts["attention"] - plain.counts["attention"] == 2 * 32 * width
    assert gated.non_embedding - plain.non_embedding == 2 * 32 * width
    for other in ("tok_emb", "ffn", "norms"):
        assert gated.counts[other] == plain.counts[other]
