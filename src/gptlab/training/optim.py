"""AdamW with decay on matrices only, and the warmup + decay schedule as a LambdaLR factor."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn

from gptlab.config import SCHEDULES, OptimConfig
from gptlab.model import mup
from gptlab.model.config import GPTConfig

PLAIN, GAINS = (True, 1.0, 1.0), (False, 1.0, 1.0)  # (decays, LR factor, ε factor) of groups 0 and 1


def param_groups(model: nn.Module, weight_decay: float, lr: float, eps: float) -> list[dict]:
    """Matrices (linear weights, embeddings) decay; gains and biases do not.

    Under μP (model.parametrization=mup) the hidden matrices move to groups of their own at
    lr × mup.lr_mult (1/fan-in multiplier) and weight decay ÷ the same multiplier, so AdamW's
    per-step decay lr·wd is the base width's at every width (what microsoft's `mup` MuAdamW does;
    Wang & Aitchison 2024 argue for a width-independent 1/(lr·wd)); group 0 keeps the configured
    LR (the one logged). Under CompleteP every parameter inside the blocks (matrices, gains, biases)
    has Adam ε × mup.adam_eps_mult (1/m_L), in groups of their own.
    """
    cfg = getattr(model, "cfg", None)
    ours = isinstance(cfg, GPTConfig)
    buckets: dict[tuple[bool, float, float], list[nn.Parameter]] = {PLAIN: [], GAINS: []}
    for name, p in model.named_parameters():
        if p.requires_grad:
            lr_m, eps_m = (mup.lr_mult(cfg, name), mup.adam_eps_mult(cfg, name)) if ours else (1.0, 1.0)
            buckets.setdefault((p.dim() >= 2, lr_m, eps_m), []).append(p)
    groups = [
        {"params": buckets.pop(PLAIN), "weight_decay": weight_decay},
        {"params": buckets.pop(GAINS), "weight_decay": 0.0},
    ]
    for (decays, m, e), params in sorted(buckets.items()):
        groups.append(
            {
                "params": params,
                "weight_decay": weight_decay / m if decays else 0.0,
                "lr": lr * m,
                "eps": eps * e,
            }
        )
    return groups


def build_adamw(model: nn.Module, cfg: OptimConfig, device_type: str) -> torch.optim.AdamW:
    """AdamW, fused on CUDA (one kernel for all parameters). Torch's AdamW decays by lr·wd per step;
    param_groups keeps that product a μP hidden group's base value (as microsoft's MuAdamW does)."""
    return torch.optim.AdamW(
        param_groups(model, cfg.weight_decay, cfg.lr, cfg.eps),
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
