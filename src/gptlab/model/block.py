"""One transformer block; the norm placement is the ablated choice, so all four live here."""

from __future__ import annotations

import torch
from torch import nn

from gptlab.model import mup
from gptlab.model.attention import CausalSelfAttention
from gptlab.model.config import GPTConfig
from gptlab.model.ffn import FeedForward
from gptlab.model.moe import MoE
from gptlab.model.norms import make_norm


def deepnorm_alpha(n_layer: int) -> float:
    """DeepNet's residual up-weighting for decoder-only models: α = (2L)^(1/4) (Wang et al. 2022)."""
    return (2 * n_layer) ** 0.25


class Block(nn.Module):
    """Attention then FFN, each wrapped by the configured norm placement."""

    def __init__(self, cfg: GPTConfig, layer: int = 0) -> None:
        super().__init__()
        self.placement = cfg.norm_placement
        self.alpha = deepnorm_alpha(cfg.n_layer) if self.placement == "deepnorm" else 1.0
        self.branch = mup.branch_mult(cfg)  # CompleteP's 1/m_L (pre-norm only); 1 otherwise
        self.attn_norm = make_norm(cfg)
        self.attn = CausalSelfAttention(cfg)
        self.ffn_norm = make_norm(cfg)
        self.ffn = MoE(cfg) if cfg.is_moe(layer) else FeedForward(cfg)  # model/ffn=moe: model/moe.py
        if self.placement == "sandwich":
            self.attn_out_norm = make_norm(cfg)
            self.ffn_out_norm = make_norm(cfg)

    def forward(
        self,
        x: torch.Tensor,
        rope: tuple[torch.Tensor, torch.Tensor] | None,
        mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """`mask`: the attention's (model/masks.py), None = causal."""
        if self.placement == "pre":  # norm on the branch: the stream is a clean identity path
            x = x + self.scaled(self.attn(self.attn_norm(x), rope, mask))
            x = x + self.scaled(self.ffn(self.ffn_norm(x)))
        elif self.placement == "post":  # Vaswani et al. 2017: norm on the stream itself
            x = self.attn_norm(x + self.attn(x, rope, mask))
            x = self.ffn_norm(x + self.ffn(x))
        elif self.placement == "sandwich":  # peri-norm: normalise the branch's input and output
            x = x + self.attn_out_norm(self.attn(self.attn_norm(x), rope, mask))
            x = x + self.ffn_out_norm(self.ffn(self.ffn_norm(x)))
        else:  # deepnorm: post-norm with the stream up-weighted by α
            x = self.attn_norm(self.alpha * x + self.attn(x, rope, mask))
            x = self.ffn_norm(self.alpha * x + self.ffn(x))
        return x

    def scaled(self, branch_out: torch.Tensor) -> torch.Tensor:
        """CompleteP's 1/m_L on a branch's output; no op at all where it is 1 (SP, μP)."""
        return branch_out if self.branch == 1.0 else self.branch * branch_out
