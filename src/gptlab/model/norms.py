"""Norm factory: torch's own fused RMSNorm / LayerNorm, gains starting at one, or DyT (no norm)."""

import torch
from torch import nn

from gptlab.model.config import GPTConfig


class DyT(nn.Module):
    """Dynamic Tanh, γ ⊙ tanh(α·x) + β (Zhu et al. 2025, "Transformers without Normalization"):
    an element-wise stand-in for a norm, with no statistics over the channels.

    α is one learned scalar per site, kept as a one-element tensor (not 0-d) so FSDP2 can shard it
    like any other parameter; γ and β are per channel. The names weight (γ) and bias (β) are the
    norms' own, so the init recipe, μP and the optimizer's groups treat them as norm gains and
    biases; α starts at model.dyt_alpha0 (model/init.py), γ at one, β at zero.
    """

    def __init__(self, dim: int, alpha0: float) -> None:
        super().__init__()
        self.alpha = nn.Parameter(torch.full((1,), float(alpha0)))
        self.weight = nn.Parameter(torch.ones(dim))
        self.bias = nn.Parameter(torch.zeros(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.weight * torch.tanh(self.alpha * x) + self.bias


def make_norm(cfg: GPTConfig) -> nn.Module:
    """RMSNorm (scale only), LayerNorm (scale, and a bias only when cfg.bias), or DyT (α, γ, β:
    its β is part of the formula, whatever cfg.bias says)."""
    if cfg.norm == "rmsnorm":
        return nn.RMSNorm(cfg.n_embd, eps=cfg.norm_eps)
    if cfg.norm == "dyt":
        return DyT(cfg.n_embd, cfg.dyt_alpha0)
    return nn.LayerNorm(cfg.n_embd, eps=cfg.norm_eps, bias=cfg.bias)
