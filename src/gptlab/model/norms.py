"""Norm factory: torch's own fused RMSNorm / LayerNorm, gains starting at one."""

from torch import nn

from gptlab.model.config import GPTConfig


def make_norm(cfg: GPTConfig) -> nn.Module:
    """RMSNorm (scale only) or LayerNorm (scale, and a bias only when cfg.bias)."""
    if cfg.norm == "rmsnorm":
        return nn.RMSNorm(cfg.n_embd, eps=cfg.norm_eps)
    return nn.LayerNorm(cfg.n_embd, eps=cfg.norm_eps, bias=cfg.bias)
