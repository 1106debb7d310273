"""AdamW with decay on matrices only, and the warmup + decay schedule as a LambdaLR factor."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn

from gptlab.config import SCHEDULES, OptimConfig


def param_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """Matrices (linear weights, embeddings) decay; gains and biases do not."""
    params = [p for p in model.parameters() if p.requires_grad]
    return [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]


def build_adamw(model: nn.Module, cfg: OptimConfig, device_type: str) -> torch.optim.AdamW:
    """AdamW, fused on CUDA (one kernel for all parameters)."""
    return torch.optim.AdamW(
        param_groups(model, cfg.weight_decay),
        lr=cfg.lr,
        betas=(cfg.beta1, cfg.beta2),
        eps=cfg.eps,
        fused=device_type == "cuda",
    )


def lr_factor(cfg: OptimConfig, max_steps: int) -> Callable[[int], float]:
    """Multiplier of cfg.lr at each step: linear warmup, then cosine/linear decay to min_lr."""
    if cfg.schedule not in SCHEDULES:
        raise ValueError(
            f"optim.schedule={cfg.schedule!r} is not accepted; choose one of {', '.join(SCHEDULES)}"
        )
    floor = cfg.min_lr / cfg.lr if cfg.lr > 0 else 0.0

    def factor(step: int) -> float:
        if step < cfg.warmup_steps:
            return (step + 1) / cfg.warmup_steps
        if cfg.schedule == "constant" or max_steps <= cfg.warmup_steps:
            return 1.0
        progress = min(1.0, (step - cfg.warmup_steps) / (max_steps - cfg.warmup_steps))
        shape = 0.5 * (1.0 + math.cos(math.pi * progress)) if cfg.schedule == "cosine" else 1 - progress
        return floor + (1.0 - floor) * shape

    return factor
