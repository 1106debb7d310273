"""The initialized weights follow the seeds' recipe table, measured tensor by tensor."""

from __future__ import annotations

import math
import re

import pytest
import torch

from gptlab.model import GPT, GPTConfig

L, D = 12, 256  # 65k+ entries per matrix: a std estimate good to ~0.3%, far inside the 5% tolerance

# The recipe, hard-coded here rather than taken from gptlab.model.init.recipe:
GLOBAL_WO = 0.02 / math.sqrt(2 * L)  # GPT-2: stream writers scaled by 1/sqrt(2L)
assert abs(GLOBAL_WO - 0.0040825) < 1e-6


def make(seed: int = 0, **kw) -> GPT:
    base = dict(vocab_size=512, block_size=256, n_layer=L, n_head=8, n_embd=D)
    torch.manual_seed(seed)
    return GPT(GPTConfig(**(base | kw)))


def expected(name: str, sigma: float, writers, deepnorm: bool = False) -> float | str:
    """The target of one parameter: a std, 'ones' or 'zeros'. `writers(l)` is W_O/W_down's std."""
    if name.endswith(".bias"):
        return "zeros"
    if re.search(r"(^|\.)\w*norm\.weight$", name):
        return "ones"
    if m := re.fullmatch(r"blocks\.(\d+)\.(attn\.out_proj|ffn\.down_proj)\.weight", name):
        return writers(int(m.group(1)))
    if re.fullmatch(r"blocks\.\d+\.(attn\.[qkv]_proj|ffn\.(gate|up)_proj)\.weight", name):
        return sigma
    if name in ("tok_emb.weight", "pos_emb.weight", "lm_head.weight"):
        return sigma
    raise AssertionError(f"the recipe table in this test does not cover {name!r}")


def check(model: GPT, sigma: float, writers, deepnorm: bool = False) -> int:
    """Compare every parameter with its target; return how many tensors were checked."""
    n = 0
    for name, p in model.named_parameters():
        target = expected(name, sigma, writers, deepnorm)
        if target == "ones":
            assert torch.equal(p, torch.ones_like(p)), name
        elif target == "zeros":
            assert torch.equal(p, torch.zeros_like(p)), name
        else:
            std = p.std().item()
            assert abs(std / target - 1) < 0.05, f"{name}: std {std:.6f}, recipe {target:.6f}"
            assert abs(p.mean().item()) < 5 * target / math.sqrt(p.numel()), name
        n += 1
    return n


def test_global_depth_scaling_untied_layernorm_with_biases():
    model = make(
        depth_scaled_init="global",
        norm="layernorm",
        bias=True,
        tie_embeddings=False,
        pos_emb="learned",
    )
    n = check(model, 0.02, lambda layer: GLOBAL_WO)
    # 12 blocks × (4 attn + 3 ffn) × (W, b) + 2 LayerNorms × 2 each; tok, pos, head; final (g, b)
    assert n == L * (7 * 2 + 2 * 2) + 3 + 2
    assert model.blocks[5].attn.out_proj.weight.std().item() == pytest.approx(0.0040825, rel=0.05)
    assert model.blocks[5].ffn.down_proj.weight.std().item() == pytest.approx(0.0040825, rel=0.05)
    assert model.blocks[5].attn.q_proj.weight.std().item() == pytest.approx(0.02, rel=0.05)
    assert model.lm_head.weight.std().item() == pytest.approx(0.02, rel=0.05)


def test_per_layer_depth_scaling():
    model = make(depth_scaled_init="per_layer")
    check(model, 0.02, lambda layer: 0.02 / math.sqrt(2 * (layer + 1)))
    assert model.blocks[0].attn.out_proj.weight.std().item() == pytest.approx(0.014142, rel=0.05)
    assert model.blocks[3].ffn.down_proj.weight.std().item() == pytest.approx(0.0070711, rel=0.05)
    assert model.blocks[11].attn.out_proj.weight.std().item() == pytest.approx(0.0040825, rel=0.05)


def test_no_depth_scaling():
    model = make(depth_scaled_init="none", ffn="gelu")
    check(model, 0.02, lambda layer: 0.02)


# DeepNorm's recipe (Xavier with gain β / 1, Wang et al. 2022) is checked against the paper's formula in
# tests/model/test_deepnorm_init.py.


def test_one_over_sqrt_d_rule():
    model = make(init_std="1/sqrt(d)", depth_scaled_init="global")
    check(model, 1 / 16, lambda layer: 1 / 16 / math.sqrt(2 * L))  # d = 256
    assert model.tok_emb.weight.std().item() == pytest.approx(0.0625, rel=0.05)
    assert model.blocks[0].attn.out_proj.weight.std().item() == pytest.approx(0.012758, rel=0.05)


# ---- determinism and re-application -------------------------------------------------------------

SMALL = dict(vocab_size=64, block_size=16, n_layer=2, n_head=4, n_embd=32, tie_embeddings=False)


def small(seed: int) -> GPT:
    torch.manual_seed(seed)
    return GPT(GPTConfig(**SMALL))


def same_weights(a: GPT, b: GPT) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def test_same_seed_same_weights():
    assert same_weights(small(0), small(0))
    assert not same_weights(small(0), small(1))


def test_reset_parameters_reapplies_the_recipe():
    model = make(depth_scaled_init="global")
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p)).mul_(3.0)  # break every tensor, norms and biases included
    assert model.blocks[0].attn.out_proj.weight.std().item() > 1.0
    model.reset_parameters()
    check(model, 0.02, lambda layer: GLOBAL_WO)


def test_reset_parameters_is_deterministic_under_a_seed():
    a, b = small(0), small(1)
    with torch.no_grad():
        for p in b.parameters():
            p.fill_(0.5)
    torch.manual_seed(7)
    a.reset_parameters()
    torch.manual_seed(7)
    b.reset_parameters()
    assert same_weights(a, b)
    before = {k: v.clone() for k, v in a.state_dict().items()}
    a.reset_parameters()  # the RNG has moved on: new draws from the same recipe
    assert not all(torch.equal(before[k], v) for k, v in a.state_dict().items())
