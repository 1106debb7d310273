"""The initialization recipe of the seeds, declared tensor by tensor and applied in one function."""

from __future__ import annotations

import math
import re

import torch
from torch import nn

from gptlab.model.config import GPTConfig

_STREAM_WRITERS = re.compile(r"blocks\.(\d+)\.(attn\.out_proj|ffn\.down_proj)\.weight$")
_DEEPNORM_BETA = re.compile(r"blocks\.(\d+)\.(attn\.v_proj|ffn\.gate_proj|ffn\.up_proj)\.weight$")


def deepnorm_beta(n_layer: int) -> float:
    """DeepNet's init down-scaling for decoder-only models: β = (8L)^(-1/4) (Wang et al. 2022)."""
    return (8 * n_layer) ** -0.25


def depth_scale(cfg: GPTConfig, layer: int) -> float:
    """Multiplier on the σ of the stream-writing projections (W_O, W_down) of block `layer`."""
    if cfg.norm_placement == "deepnorm":
        return deepnorm_beta(cfg.n_layer)
    if cfg.depth_scaled_init == "global":
        return 1.0 / math.sqrt(2 * cfg.n_layer)  # v_2L = 1 + 2L·σ²/(2L): independent of L
    if cfg.depth_scaled_init == "per_layer":
        return 1.0 / math.sqrt(2 * (layer + 1))
    return 1.0


def recipe(cfg: GPTConfig, name: str) -> float | str:
    """The recipe table: the target std of parameter `name`, or 'ones' / 'zeros'."""
    if name.endswith(".bias"):
        return "zeros"  # no reason to break symmetry twice
    if "norm" in name.rsplit(".", 2)[-2]:
        return "ones"  # every norm starts as identity, so the block begins as a pass-through
    sigma = cfg.std
    if m := _STREAM_WRITERS.search(name):
        return sigma * depth_scale(cfg, int(m.group(1)))  # these write into the residual stream
    if cfg.norm_placement == "deepnorm" and _DEEPNORM_BETA.search(name):
        return sigma * deepnorm_beta(cfg.n_layer)
    return sigma  # q, k, v, gate, up, tok_emb, pos_emb, untied lm_head


@torch.no_grad()
def init_weights(model: nn.Module, cfg: GPTConfig) -> None:
    """Apply `recipe` to every parameter (a tied matrix once); deterministic under torch.manual_seed."""
    for name, p in model.named_parameters():
        target = recipe(cfg, name)
        if target == "zeros":
            nn.init.zeros_(p)
        elif target == "ones":
            nn.init.ones_(p)
        else:
            nn.init.normal_(p, mean=0.0, std=float(target))
