"""μP against a second oracle: microsoft's `mup` package (1.0.0, installed by `make install`).

The package decides, from the shapes of a base and a delta model, which parameters are hidden
(matrix-like: two widths) and which are vector-like (embeddings, gains), and from that the init
scale (`mup.init.normal_`), each AdamW group's LR and weight decay (`MuAdamW`) and the readout's 1/m
(`MuReadout` / `MuSharedReadout`). A plain-PyTorch GPT written here takes those from the package;
ours takes them from gptlab.model.mup. The attention's 1/d_h is the user's part in the package
(its README), written here as in the paper.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from gptlab.config import OptimConfig
from gptlab.model import GPT, GPTConfig
from gptlab.training.optim import build_adamw

mup = pytest.importorskip("mup", reason="microsoft's mup: `make install` adds it (pip install --no-deps mup)")

VOCAB, T, HEADS, LAYERS, BASE = 64, 16, 2, 2, 16
OPT = OptimConfig(lr=3e-3, weight_decay=0.1, warmup_steps=0)


class PlainGPT(nn.Module):
    """Pre-RMSNorm, learned positions, GELU FFN, no biases; parameter names as gptlab's GPT."""

    def __init__(self, d: int, tied: bool) -> None:
        super().__init__()
        self.d = d
        self.tok_emb = nn.Embedding(VOCAB, d)
        self.pos_emb = nn.Embedding(T, d)
        self.blocks = nn.ModuleList()
        for _ in range(LAYERS):
            block = nn.Module()
            block.attn_norm, block.ffn_norm = nn.RMSNorm(d, eps=1e-5), nn.RMSNorm(d, eps=1e-5)
            block.attn = nn.Module()
            for name in ("q_proj", "k_proj", "v_proj", "out_proj"):
                setattr(block.attn, name, nn.Linear(d, d, bias=False))
            block.ffn = nn.Module()
            block.ffn.up_proj = nn.Linear(d, 4 * d, bias=False)
            block.ffn.down_proj = nn.Linear(4 * d, d, bias=False)
            self.blocks.append(block)
        self.final_norm = nn.RMSNorm(d, eps=1e-5)
        if tied:
            self.lm_head = mup.MuSharedReadout(self.tok_emb.weight, bias=False)
        else:
            self.lm_head = mup.MuReadout(d, VOCAB, bias=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        B, L = idx.shape
        dh, dh0 = self.d // HEADS, BASE // HEADS
        x = self.tok_emb(idx) + self.pos_emb.weight[:L]
        for blk in self.blocks:
            h = blk.attn_norm(x)
            q, k, v = (getattr(blk.attn, f"{n}_proj")(h).view(B, L, HEADS, dh).transpose(1, 2) for n in "qkv")
            att = (q @ k.transpose(-1, -2)) * (math.sqrt(dh0) / dh)
            att = att.masked_fill(~torch.ones(L, L, dtype=torch.bool).tril(), float("-inf")).softmax(-1)
            x = x + blk.attn.out_proj((att @ v).transpose(1, 2).reshape(B, L, self.d))
            x = x + blk.ffn.down_proj(F.gelu(blk.ffn.up_proj(blk.ffn_norm(x))))
        return self.lm_head(self.final_norm(x))


def plain_mup(d: int, tied: bool) -> PlainGPT:
    """The package's μP: base width BASE, delta 2·BASE (which dimensions are widths), target d."""
    model = PlainGPT(d, tied)
    mup.set_base_shapes(model, PlainGPT(BASE, tied), delta=PlainGPT(2 * BASE, tied), rescale_params=False)
    return model


def ours(d: int, tied: bool) -> GPT:
    cfg = GPTConfig(
        vocab_size=VOCAB, block_size=T, n_layer=LAYERS, n_head=HEADS, n_embd=d, ffn="gelu", pos_emb="learned",
        tie_embeddings=tied, depth_scaled_init="none", parametrization="mup", mup_base_width=BASE,
    )  # fmt: skip
    return GPT(cfg)


def test_the_packages_init_scale_is_ours() -> None:
    """mup.init.normal_(std=σ) gives hidden matrices σ/sqrt(m) and vector-like ones σ: ours too."""
    d, sigma = 256, 0.02
    torch.manual_seed(0)
    model, reference = ours(d, tied=False), plain_mup(d, tied=False)
    ref_params = dict(reference.named_parameters())
    for name, p in model.named_parameters():
        if p.dim() < 2:
            continue
        ref = ref_params[name]
        mup.init.normal_(ref, std=sigma)
        expected = ref.std().item()
        assert p.std().item() == pytest.approx(expected, rel=0.05), name
    # sharp: the package scales the hidden ones by 1/sqrt(m), m = 16 here
    assert ref_params["blocks.0.attn.q_proj.weight"].std().item() == pytest.approx(sigma / 4, rel=0.05)


@pytest.mark.parametrize("tied", [True, False])
def test_training_follows_the_packages_muadamw_and_readout(tied: bool) -> None:
    """Our μP GPT and the package's, from the same weights, through 4 AdamW steps (float64)."""
    d = 64
    torch.manual_seed(0)
    model = ours(d, tied).double()
    reference = plain_mup(d, tied).double()
    with torch.no_grad():
        for name, p in model.named_parameters():
            reference.get_parameter(name).copy_(p)
    matrices = [p for p in reference.parameters() if p.dim() >= 2]
    gains = [p for p in reference.parameters() if p.dim() < 2]
    ref_opt = mup.MuAdamW(
        [{"params": matrices, "weight_decay": OPT.weight_decay}, {"params": gains, "weight_decay": 0.0}],
        lr=OPT.lr, betas=(OPT.beta1, OPT.beta2), eps=OPT.eps,
    )  # fmt: skip
    our_opt = build_adamw(model, OPT, "cpu")
    batch = torch.randint(0, VOCAB, (4, T + 1), generator=torch.Generator().manual_seed(1))
    x, y = batch[:, :-1], batch[:, 1:]
    for step in range(5):
        got, want = model(x), reference(x)
        torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-10, msg=f"after {step} steps")
        for opt, logits in ((our_opt, got), (ref_opt, want)):
            opt.zero_grad()
            F.cross_entropy(logits.flatten(0, 1), y.flatten()).backward()
            opt.step()
    # sharp: the package's groups are not one LR for all (the hidden ones run at lr·BASE/d)
    assert sorted({g["lr"] for g in ref_opt.param_groups}) == [OPT.lr * BASE / d, OPT.lr]
