"""DeepNorm's init as DeepNet specifies it (Wang et al. 2022, decoder-only), measured tensor by tensor.

The expected stds are written here from the paper: Xavier normal, std = gain·sqrt(2/(fan_in+fan_out)),
gain β = (8N)^(-1/4) for v, out and the FFN matrices, gain 1 for q and k; our choice for the gate of
a gated FFN is gain 1 (see gptlab.model.init), and the branch variance that choice gives is checked.
"""

from __future__ import annotations

import math

import pytest
import torch

from gptlab.model import GPT, GPTConfig
from gptlab.model.ffn import FeedForward

N, D = 12, 256  # ≥ 65k entries per matrix: the std estimate is good to ~0.3%
BETA = (8 * N) ** -0.25
assert abs(BETA - 0.319472) < 1e-6


def paper_std(fan_in: int, fan_out: int, gain: float) -> float:
    return gain * math.sqrt(2.0 / (fan_in + fan_out))


def deepnorm(ffn: str) -> GPT:
    torch.manual_seed(0)
    cfg = GPTConfig(vocab_size=512, block_size=64, n_layer=N, n_head=8, n_embd=D, ffn=ffn,
                    norm_placement="deepnorm", depth_scaled_init="none", norm="layernorm")  # fmt: skip
    return GPT(cfg)


@pytest.mark.parametrize("ffn", ["gelu", "swiglu"])
def test_block_matrices_follow_the_paper(ffn: str) -> None:
    model = deepnorm(ffn)
    hidden = 4 * D if ffn == "gelu" else 704  # 8/3·256 rounded up to a multiple of 64
    gains = {"q_proj": 1.0, "k_proj": 1.0, "v_proj": BETA, "out_proj": BETA}
    for block in (model.blocks[0], model.blocks[7], model.blocks[N - 1]):
        for name, gain in gains.items():
            w = getattr(block.attn, name).weight
            assert w.std().item() == pytest.approx(paper_std(D, D, gain), rel=0.02), name
        assert block.ffn.up_proj.weight.std().item() == pytest.approx(paper_std(D, hidden, BETA), rel=0.02)
        assert block.ffn.down_proj.weight.std().item() == pytest.approx(paper_std(hidden, D, BETA), rel=0.02)
        if ffn == "swiglu":  # the gate: gain 1 (our choice for the paper's ungated FFN)
            assert block.ffn.gate_proj.weight.std().item() == pytest.approx(
                paper_std(D, hidden, 1.0), rel=0.02
            )
    # q at L = 12, d = 256: the paper's std is 0.0625, not the project's σ = 0.02
    assert model.blocks[3].attn.q_proj.weight.std().item() == pytest.approx(0.0625, rel=0.02)
    assert model.tok_emb.weight.std().item() == pytest.approx(0.02, rel=0.02)  # outside the blocks: σ


def test_gated_branch_variance_matches_the_ungated_one() -> None:
    """With gain 1 on the gate the gated branch's output variance at init is within 2× of the ungated
    GELU branch's (both ∝ β⁴); β on the gate as well would shrink it by another ~β²."""
    torch.manual_seed(0)
    x = torch.randn(2048, 96)  # the branch input after LayerNorm
    out = {}
    for ffn in ("gelu", "swiglu"):
        cfg = GPTConfig(
            n_layer=N, n_embd=96, n_head=4, ffn=ffn, norm_placement="deepnorm", depth_scaled_init="none"
        )
        model = GPT(cfg)  # the init of a whole model, then one block's FFN
        f: FeedForward = model.blocks[0].ffn
        with torch.no_grad():
            out[ffn] = f(x).pow(2).mean().item()
            if ffn == "swiglu":
                f.gate_proj.weight.mul_(BETA)
                out["swiglu, β on gate"] = f(x).pow(2).mean().item()
    assert 0.5 < out["swiglu"] / out["gelu"] < 2.0, out
    assert out["swiglu, β on gate"] / out["gelu"] < 0.25, out
