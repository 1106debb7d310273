"""Statistics of a model at initialization, on real tokens: the two pictures the seeds argue from.

(a) Residual-stream variance after each block for depth_scaled_init none / global / per_layer,
    beside the seeds' prediction v_k = v0 + k·σ_b² (k residual additions, 2 per block).
(b) Per-block gradient norms for pre-norm against post-norm (Xiong et al. 2020, Fig. 3).

The estimator of σ_b². "Variance" here is the second moment E[x²] over batch, positions and
channels (the stream and the branch outputs are near zero-mean at init, and the additive argument
E[(x+f)²] = E[x²] + E[f²] + 2E[x·f] holds for second moments exactly). For each residual branch j
we hook the tensor it adds to the stream (attn / ffn output; the out-norm's output for sandwich)
and take s_j = E[f_j²]. In the unscaled model (depth_scaled_init=none) every branch reads a
normalized input, so the seeds take s_j to be one number; σ_b² is their mean over the 2L branches
and over the init seeds (the report lists s_j per branch, attention and FFN apart, to show how far
that holds). Depth scaling multiplies W_O / W_down (hence f_j) by c_j, so the prediction
for every scheme comes from that one σ_b²: v_k = v0 + σ_b² · Σ_{j≤k} c_j². For none that is the
seeds' straight line v0 + k·σ_b²; for global (c² = 1/2L) it ends at v0 + σ_b² whatever L is.
The gap between the measured v_k and v0 + Σ_j s_j is the cross term 2·Σ E[x·f], i.e. how far the
independence assumption is off. Measured and predicted are both shown; nothing is fitted.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from gptlab.model import GPT, GPTConfig
from gptlab.model.init import depth_scale

log = logging.getLogger(__name__)

SCHEMES = ("none", "global", "per_layer")
STREAM_PLACEMENTS = ("pre", "sandwich")  # placements whose stream is an un-normalized sum


def _build(cfg: GPTConfig, seed: int) -> GPT:
    torch.manual_seed(seed)
    model = GPT(cfg)
    model.eval()  # dropout off: the statistics are of the init, not of a random mask
    return model


@dataclass
class VarianceProfile:
    """One depth-scaling scheme: second moments of the stream after each block and of each branch."""

    scheme: str
    v0: float  # E[x0²] of the embedding output that enters block 0
    stream: list[float]  # E[x²] after block l, l = 0..L-1 (after its 2nd addition)
    branch: list[float]  # E[f_j²] of branch j = 0..2L-1 (attn of block l is 2l, ffn 2l+1)
    scale: list[float]  # c_j, the depth-scale multiplier of branch j's W_O / W_down
    predicted: list[float] = dataclasses.field(default_factory=list)  # v0 + σ_b² Σ c_j², per block

    @property
    def cumulative(self) -> list[float]:
        """v0 + Σ_{j≤k} E[f_j²] after each block: the measured stream if the cross terms were zero."""
        out, acc = [], self.v0
        for j, s in enumerate(self.branch):
            acc += s
            if j % 2 == 1:
                out.append(acc)
        return out


@torch.no_grad()
def _moments(cfg: GPTConfig, tokens: torch.Tensor, seed: int) -> tuple[float, list[float], list[float]]:
    """v0, the stream's E[x²] after each block and each branch's E[f²], for one init draw."""
    model = _build(cfg, seed)
    branch_out: dict[int, float] = {}
    stream: dict[int, float] = {}
    v0: list[float] = []
    hooks = []
    for i, block in enumerate(model.blocks):
        if cfg.norm_placement == "sandwich":
            writers = (block.attn_out_norm, block.ffn_out_norm)
        else:
            writers = (block.attn, block.ffn)
        for part, module in enumerate(writers):
            j = 2 * i + part

            def save_branch(mod: Any, args: Any, out: torch.Tensor, j: int = j) -> None:
                branch_out[j] = out.double().pow(2).mean().item()

            hooks.append(module.register_forward_hook(save_branch))

        def save_stream(mod: Any, args: Any, out: torch.Tensor, i: int = i) -> None:
            stream[i] = out.double().pow(2).mean().item()

        hooks.append(block.register_forward_hook(save_stream))
    hooks.append(
        model.blocks[0].register_forward_pre_hook(
            lambda mod, args: v0.append(args[0].double().pow(2).mean().item())
        )
    )
    try:
        model(tokens[:, :-1])  # windows hold block_size+1 tokens: inputs and shifted targets
    finally:
        for h in hooks:
            h.remove()
    L = cfg.n_layer
    return v0[0], [stream[i] for i in range(L)], [branch_out[j] for j in range(2 * L)]


def residual_variance(
    cfg: GPTConfig,
    tokens: torch.Tensor,
    seeds: Sequence[int] = (0, 1, 2),
    schemes: Sequence[str] = SCHEMES,
) -> tuple[dict[str, VarianceProfile], float]:
    """(a): one VarianceProfile per depth-scaling scheme, averaged over init seeds, with predictions
    from σ_b² measured in the unscaled model; returns (profiles, σ_b²)."""
    if cfg.norm_placement not in STREAM_PLACEMENTS:
        raise ValueError(
            f"model.norm_placement={cfg.norm_placement!r}: the stream-variance argument needs an "
            f"un-normalized residual stream; accepted: {', '.join(STREAM_PLACEMENTS)}"
        )
    profiles: dict[str, VarianceProfile] = {}
    for scheme in dict.fromkeys(("none", *schemes)):
        c = dataclasses.replace(cfg, depth_scaled_init=scheme)
        runs = [_moments(c, tokens, s) for s in seeds]
        n = len(runs)
        v0 = sum(r[0] for r in runs) / n
        stream = [sum(r[1][i] for r in runs) / n for i in range(cfg.n_layer)]
        branch = [sum(r[2][j] for r in runs) / n for j in range(2 * cfg.n_layer)]
        scale = [depth_scale(c, j // 2) for j in range(2 * cfg.n_layer)]
        profiles[scheme] = VarianceProfile(scheme, v0, stream, branch, scale)
    none = profiles["none"]
    sigma_b2 = sum(none.branch) / len(none.branch)
    for p in profiles.values():
        acc, pred = p.v0, []
        for j, c in enumerate(p.scale):
            acc += sigma_b2 * c * c
            if j % 2 == 1:
                pred.append(acc)
        p.predicted = pred
    return {s: profiles[s] for s in schemes}, sigma_b2


def _block_grad_norms(model: GPT) -> list[float]:
    """L2 norm of all of block l's parameter gradients (the telemetry's grad_norm/block_XX)."""
    out = []
    for block in model.blocks:
        sq = sum(float(p.grad.double().pow(2).sum()) for p in block.parameters() if p.grad is not None)
        out.append(math.sqrt(sq))
    return out


def grad_profiles(
    cfg: GPTConfig,
    tokens: torch.Tensor,
    placements: Sequence[str] = ("pre", "post"),
    seeds: Sequence[int] = (0, 1, 2),
) -> dict[str, list[float]]:
    """(b): per-block gradient norms at init of the next-token loss on `tokens`, for each placement
    with everything else equal (deepnorm forces depth_scaled_init=none), averaged over seeds."""
    x, y = tokens[:, :-1], tokens[:, 1:]
    out: dict[str, list[float]] = {}
    for placement in placements:
        dsi = "none" if placement == "deepnorm" else cfg.depth_scaled_init
        c = dataclasses.replace(cfg, norm_placement=placement, depth_scaled_init=dsi)
        acc = [0.0] * cfg.n_layer
        for s in seeds:
            model = _build(c, s)
            loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
            loss.backward()
            acc = [a + g for a, g in zip(acc, _block_grad_norms(model), strict=True)]
        out[placement] = [a / len(seeds) for a in acc]
    return out


def real_tokens(train_cfg: Any, batch: int) -> tuple[torch.Tensor, int]:
    """`batch` windows (block_size+1 tokens) of the configured data's val split, in order, and the
    tokenizer's vocabulary size, through the project's TokenDataModule."""
    from gptlab.data.datamodule import TokenDataModule, collate_windows

    dm = TokenDataModule(train_cfg.data, block_size=train_cfg.model.block_size, seed=train_cfg.seed)
    dm.prepare()
    val = dm.dataset("val")
    if len(val) < batch:
        raise ValueError(
            f"data: the val split has {len(val)} windows, fewer than batch={batch}; "
            "raise data.max_bytes or lower batch"
        )
    return collate_windows([val[k] for k in range(batch)]), int(dm.vocab_size or 0)
