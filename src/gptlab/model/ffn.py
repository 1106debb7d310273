"""Feed-forward networks: gated (SwiGLU, GEGLU with exact or tanh GELU, ReGLU) and ungated (GELU,
tanh-GELU, ReLU)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import torch
import torch.nn.functional as F
from torch import nn

from gptlab.model.config import GPTConfig

ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "swiglu": F.silu,
    "geglu": F.gelu,
    "reglu": F.relu,
    "geglu_tanh": partial(F.gelu, approximate="tanh"),  # Gemma's GeGLU (gelu_pytorch_tanh)
    "gelu": F.gelu,
    "gelu_tanh": partial(F.gelu, approximate="tanh"),  # GPT-2's approximation
    "relu": F.relu,
}


class FeedForward(nn.Module):
    """down_proj(act(gate_proj(x)) * up_proj(x)) when gated, down_proj(act(up_proj(x))) otherwise."""

    def __init__(self, cfg: GPTConfig, hidden: int | None = None) -> None:
        super().__init__()
        d, h = cfg.n_embd, hidden or cfg.hidden_dim  # hidden: a MoE's shared experts' width
        self.act = ACTIVATIONS[cfg.ffn_kind]
        self.gate_proj = nn.Linear(d, h, bias=cfg.bias) if cfg.gated else None
        self.up_proj = nn.Linear(d, h, bias=cfg.bias)
        self.down_proj = nn.Linear(h, d, bias=cfg.bias)
        self.resid_drop = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.gate_proj is not None:
            h = self.act(self.gate_proj(x)) * self.up_proj(x)
        else:
            h = self.act(self.up_proj(x))
        return self.resid_drop(self.down_proj(h))
