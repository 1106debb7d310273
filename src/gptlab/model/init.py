"""The initialization recipe of the seeds, declared tensor by tensor and applied in one function.

DeepNorm (Wang et al. 2022, the decoder-only case) has its own recipe: Xavier-normal matrices,
std = gain·sqrt(2/(fan_in + fan_out)), with gain β = (8N)^(-1/4) on v, out and the FFN's matrices
and gain 1 on q and k (N = n_layer; the residual's α = (2N)^(1/4) lives in block.py). The paper's
FFN has no gate. Here the gate takes gain 1, like q and k: it shapes which hidden units pass (as
the attention pattern shapes which positions do) and writes nothing into the stream itself, while
up and down carry the branch's value path and take β. Then a gated branch's output scales with β²
at init, as the ungated one's does; β on the gate too would make it β³ (a smaller branch at init
than the paper's derivation assumes). docs/ablations.md, "DeepNorm init", has the measured
variances.
"""

from __future__ import annotations

import math
import re

import torch
from torch import nn

from gptlab.model import mup
from gptlab.model.config import GPTConfig

# (ffn=moe: the experts' stacked down_proj and the shared experts' write into the stream too)
_STREAM_WRITERS = re.compile(
    r"blocks\.(\d+)\.(attn\.out_proj\.weight|ffn\.(?:shared\.)?down_proj\.weight|ffn\.experts\.down_proj)$"
)
_BLOCK_MATRIX = re.compile(r"blocks\.\d+\.(attn\.(q|k|v|out)_proj|ffn\.(gate|up|down)_proj)\.weight$")
DEEPNORM_UNIT_GAIN = ("attn.q_proj", "attn.k_proj", "ffn.gate_proj")  # every other block matrix: β


def deepnorm_beta(n_layer: int) -> float:
    """DeepNet's init down-scaling for decoder-only models: β = (8L)^(-1/4) (Wang et al. 2022)."""
    return (8 * n_layer) ** -0.25


def xavier_std(shape: torch.Size | tuple[int, ...], gain: float) -> float:
    """Xavier (Glorot) normal std of a Linear weight of shape (fan_out, fan_in)."""
    fan_out, fan_in = shape[0], shape[1]
    return gain * math.sqrt(2.0 / (fan_in + fan_out))


def depth_scale(cfg: GPTConfig, layer: int) -> float:
    """Multiplier on the σ of the stream-writing projections (W_O, W_down) of block `layer`."""
    if cfg.norm_placement == "deepnorm":
        return deepnorm_beta(cfg.n_layer)
    if cfg.depth_scaled_init == "global":
        return 1.0 / math.sqrt(2 * mup.init_depth(cfg))  # v_2L = 1 + 2L·σ²/(2L): independent of L
    if cfg.depth_scaled_init == "per_layer":
        return 1.0 / math.sqrt(2 * (layer + 1))
    return 1.0


def deepnorm_std(cfg: GPTConfig, name: str, shape: torch.Size | tuple[int, ...]) -> float | None:
    """DeepNorm's Xavier std for a block matrix (None: not a block matrix, the general rule applies)."""
    m = _BLOCK_MATRIX.search(name)
    if m is None:
        return None
    unit = m.group(1) in DEEPNORM_UNIT_GAIN
    return xavier_std(shape, 1.0 if unit else deepnorm_beta(cfg.n_layer))


def recipe(cfg: GPTConfig, name: str, shape: torch.Size | tuple[int, ...] = ()) -> float | str:
    """The recipe table: the target std of parameter `name` (of `shape`), or 'ones' / 'zeros' /
    'dyt_alpha0' (a DyT site's α: the constant model.dyt_alpha0)."""
    if name.endswith(".bias"):
        return "zeros"  # no reason to break symmetry twice
    if name.endswith(".alpha"):
        return "dyt_alpha0"  # DyT's scale inside tanh: model.dyt_alpha0 at every site
    if "norm" in name.rsplit(".", 2)[-2]:
        return "ones"  # every norm starts as identity, so the block begins as a pass-through
    if cfg.norm_placement == "deepnorm" and (std := deepnorm_std(cfg, name, shape)) is not None:
        return std
    sigma = cfg.std * mup.init_std_mult(cfg, name)  # μP: hidden matrices' variance ∝ 1/fan_in
    if m := _STREAM_WRITERS.search(name):
        return sigma * depth_scale(cfg, int(m.group(1)))  # these write into the residual stream
    return sigma  # q, k, v, gate, up, tok_emb, pos_emb, untied lm_head


@torch.no_grad()
def init_weights(model: nn.Module, cfg: GPTConfig) -> None:
    """Apply `recipe` to every parameter (a tied matrix once); deterministic under torch.manual_seed."""
    for name, p in model.named_parameters():
        target = recipe(cfg, name, tuple(p.shape))
        if target == "zeros":
            nn.init.zeros_(p)
        elif target == "ones":
            nn.init.ones_(p)
        elif target == "dyt_alpha0":
            nn.init.constant_(p, cfg.dyt_alpha0)
        else:
            nn.init.normal_(p, mean=0.0, std=float(target))
