"""Every architectural combination builds, runs forward and backward, and starts at chance."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
import torch.nn.functional as F

from gptlab.model import GPT, GPTConfig

PLACEMENTS = ("pre", "post", "sandwich", "deepnorm")
NORMS = ("rmsnorm", "layernorm")
FFNS = ("swiglu", "geglu", "reglu", "gelu", "gelu_tanh", "relu")
TYING = (True, False)
POS_EMBS = ("rope", "learned")

VOCAB, T, B = 128, 16, 4


def tiny(placement: str, norm: str, ffn: str, tie: bool, pos_emb: str, **kw) -> GPTConfig:
    """A 2-layer, d=32 model: big enough to exercise every code path, small enough for 192 runs."""
    return GPTConfig(
        vocab_size=VOCAB,
        block_size=T,
        n_layer=2,
        n_head=4,
        n_embd=32,
        norm=norm,
        norm_placement=placement,
        ffn=ffn,
        ffn_multiple_of=16,
        tie_embeddings=tie,
        pos_emb=pos_emb,
        # deepnorm carries its own β scaling and refuses a second depth scaling
        depth_scaled_init="none" if placement == "deepnorm" else "global",
        **kw,
    )


@pytest.mark.parametrize(
    "placement,norm,ffn,tie,pos_emb",
    list(itertools.product(PLACEMENTS, NORMS, FFNS, TYING, POS_EMBS)),
)
def test_every_combination_runs_and_starts_at_chance(placement, norm, ffn, tie, pos_emb):
    torch.manual_seed(0)
    model = GPT(tiny(placement, norm, ffn, tie, pos_emb))
    idx = torch.randint(0, VOCAB, (B, T))
    targets = torch.randint(0, VOCAB, (B, T))  # independent of the inputs: nothing to predict

    logits = model(idx)
    assert logits.shape == (B, T, VOCAB)
    loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
    # near-uniform predictions at init: ln V, plus a little from the logits' spread
    assert abs(loss.item() - math.log(VOCAB)) < 0.1, loss.item()

    loss.backward()
    for name, p in model.named_parameters():
        assert p.grad is not None, f"{name} received no gradient (unused parameter?)"
        assert torch.isfinite(p.grad).all(), f"{name} has a non-finite gradient"


@pytest.mark.parametrize("placement", PLACEMENTS)
def test_layernorm_with_biases_runs(placement):
    torch.manual_seed(0)
    model = GPT(tiny(placement, "layernorm", "gelu", False, "learned", bias=True))
    idx = torch.randint(0, VOCAB, (B, T))
    loss = F.cross_entropy(model(idx).flatten(0, 1), torch.randint(0, VOCAB, (B * T,)))
    assert abs(loss.item() - math.log(VOCAB)) < 0.1
    loss.backward()
    biases = [n for n, _ in model.named_parameters() if n.endswith(".bias")]
    assert biases, "bias=True built no biases"
    assert all(torch.isfinite(p.grad).all() for p in model.parameters())


def test_sequence_longer_than_block_size_is_refused():
    model = GPT(tiny("pre", "rmsnorm", "swiglu", True, "rope"))
    with pytest.raises(ValueError, match="block_size"):
        model(torch.zeros(1, T + 1, dtype=torch.long))


def _reference_ffn(name: str, ffn, x: torch.Tensor) -> torch.Tensor:
    """The seven FFNs written out: gated ones multiply act(gate) by up, ungated apply act to up."""
    acts = {
        "swiglu": lambda z: z * torch.sigmoid(z),  # SiLU
        "geglu": lambda z: 0.5 * z * (1 + torch.erf(z / math.sqrt(2))),  # exact GELU
        "reglu": torch.relu,
        "gelu": lambda z: 0.5 * z * (1 + torch.erf(z / math.sqrt(2))),
        "gelu_tanh": lambda z: 0.5 * z * (1 + torch.tanh(math.sqrt(2 / math.pi) * (z + 0.044715 * z**3))),
        "geglu_tanh": lambda z: 0.5 * z * (1 + torch.tanh(math.sqrt(2 / math.pi) * (z + 0.044715 * z**3))),
        "relu": torch.relu,
    }
    act = acts[name]
    if ffn.gate_proj is not None:
        h = act(x @ ffn.gate_proj.weight.T) * (x @ ffn.up_proj.weight.T)
    else:
        h = act(x @ ffn.up_proj.weight.T)
    return h @ ffn.down_proj.weight.T


@pytest.mark.parametrize("ffn", (*FFNS, "geglu_tanh"))  # geglu_tanh: Gemma's GeGLU (export/gemma2.py)
def test_ffn_computes_its_formula(ffn):
    torch.manual_seed(0)
    cfg = tiny("pre", "rmsnorm", ffn, True, "rope", init_std=0.5)  # large: activations matter
    module = GPT(cfg).blocks[0].ffn
    assert (module.gate_proj is not None) == (ffn in ("swiglu", "geglu", "reglu", "geglu_tanh"))
    if ffn == "geglu_tanh":  # counted like geglu: the same three matrices
        assert GPT(cfg).num_params() == GPT(tiny("pre", "rmsnorm", "geglu", True, "rope")).num_params()
    x = torch.randn(3, 5, 32)
    torch.testing.assert_close(module(x), _reference_ffn(ffn, module, x), rtol=1e-5, atol=1e-5)
