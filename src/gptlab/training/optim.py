"""AdamW with decay on matrices only, and the warmup + decay schedule as a LambdaLR factor."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn

from gptlab.config import SCHEDULES, OptimConfig
from gptlab.model import mup
from gptlab.model.config import GPTConfig


def param_groups(model: nn.Module, weight_decay: float, lr: float) -> list[dict]:
    """Matrices (linear weights, embeddings) decay; gains and biases do not.

    Under μP (model.parametrization=mup) the hidden matrices move to groups of their own at
    lr × mup.lr_mult (1/fan-in multiplier) and weight decay ÷ the same multiplier, so AdamW's
    per-step decay lr·wd is the base width's at every width (what microsoft's `mup` MuAdamW does;
    Wang & Aitchison 2024 argue for a width-independent 1/(lr·wd)); group 0 keeps the configured
    LR (the one logged).
    """
    cfg = getattr(model, "cfg", None)
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    mult = {n: mup.lr_mult(cfg, n) if isinstance(cfg, GPTConfig) else 1.0 for n, _ in named}
    groups = [
        {"params": [p for n, p in named if p.dim() >= 2 and mult[n] == 1.0], "weight_decay": weight_decay},
        {"params": [p for _, p in named if p.dim() < 2], "weight_decay": 0.0},
    ]
    for m in sorted({v for v in mult.values() if v != 1.0}):
        params = [p for n, p in named if mult[n] == m]
        groups.append({"params": params, "weight_decay": weight_decay / m, "lr": lr * m})
    return groups


def build_adamw(model: nn.Module, cfg: OptimConfig, device_type: str) -> torch.optim.AdamW:
    """AdamW, fused on CUDA (one kernel for all parameters). Torch's AdamW decays by lr·wd per step;
    param_groups keeps that product a μP hidden group's base value (as microsoft's MuAdamW does)."""
    return torch.optim.AdamW(
        param_groups(model, cfg.weight_decay, cfg.lr),
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
