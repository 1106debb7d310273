"""μP's coordinate check (Yang et al. 2022, Tensor Programs V, §7 and their figure 5): train the same
model at several widths for a few Adam steps and measure each activation's coordinate size (RMS).
Under μP the sizes stay flat in width; under SP the updates' share grows with width, so the logits
and the blocks' outputs grow. The real GPT and the real optimizer groups (training/optim.py) are
measured; one fixed batch of random tokens is trained on, so every width sees the same data.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

import numpy as np
import torch
from torch import nn

from gptlab.config import OptimConfig
from gptlab.model import GPT, GPTConfig
from gptlab.training.optim import build_adamw


def probes(model: GPT) -> dict[str, nn.Module]:
    """The modules whose output is measured: the embedding, each block's attention, FFN and output
    (the stream after it), and the model itself (the logits)."""
    out: dict[str, nn.Module] = {"tok_emb": model.tok_emb}
    for i, block in enumerate(model.blocks):
        out |= {f"blocks.{i}.attn": block.attn, f"blocks.{i}.ffn": block.ffn, f"blocks.{i}": block}
    return out | {"logits": model}


def rms_after_steps(
    cfg: GPTConfig, lr: float, steps: int, seed: int, batch: torch.Tensor
) -> dict[str, float]:
    """Each probe's output RMS on `batch` after `steps` AdamW steps (no warmup, no decay, no clip)."""
    torch.manual_seed(seed)
    model = GPT(cfg)
    opt = build_adamw(model, OptimConfig(lr=lr, min_lr=0.0, weight_decay=0.0, warmup_steps=0), "cpu")
    x, y = batch[:, :-1], batch[:, 1:]
    for _ in range(steps):
        loss = nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    sizes: dict[str, float] = {}
    hooks = [
        m.register_forward_hook(
            lambda _m, _i, o, name=name: sizes.__setitem__(name, o.pow(2).mean().sqrt().item())
        )
        for name, m in probes(model).items()
    ]
    with torch.no_grad():
        model(x)
    for h in hooks:
        h.remove()
    return sizes


def coord_check(
    cfg: GPTConfig, widths: list[int], lr: float, steps: int, seeds: int = 1, batch_size: int = 8
) -> dict[int, dict[str, float]]:
    """width → probe → RMS (mean over seeds); cfg gives everything but n_embd (and its μP base)."""
    return _over(cfg, "n_embd", widths, rms_after_steps, lr, steps, seeds, batch_size)


def _over(
    cfg: GPTConfig, field: str, values: list[int], measure: Callable[..., dict[str, float]],
    lr: float, steps: int, seeds: int, batch_size: int,
) -> dict[int, dict[str, float]]:  # fmt: skip
    """value of `field` → measure's sizes, mean over seeds, every model trained on one fixed batch."""
    gen = torch.Generator().manual_seed(0)
    batch = torch.randint(0, cfg.vocab_size, (batch_size, cfg.block_size + 1), generator=gen)
    out: dict[int, dict[str, float]] = {}
    for value in values:
        runs = [measure(replace(cfg, **{field: value}), lr, steps, s, batch) for s in range(seeds)]
        out[value] = {k: float(np.mean([r[k] for r in runs])) for k in runs[0]}
    return out


def slopes(sizes: dict[int, dict[str, float]]) -> dict[str, float]:
    """Per probe, the least-squares slope of log2 RMS on log2 width: 0 flat, 1 ∝ width."""
    widths = sorted(sizes)
    x = np.log2(widths)
    return {
        k: float(np.polyfit(x, np.log2([sizes[w][k] for w in widths]), 1)[0])
        for k in sizes[widths[0]]
        if all(math.isfinite(sizes[w][k]) and sizes[w][k] > 0 for w in widths)
    }


def stream_sizes(cfg: GPTConfig, lr: float, steps: int, seed: int, batch: torch.Tensor) -> dict[str, float]:
    """The residual stream after the last block (before the final norm): its RMS at init, the RMS of
    its change after `steps` AdamW steps, and the logits' RMS then. Depth's coordinate check: under
    CompleteP the change stays flat in depth; without a branch multiplier each block adds its own
    update and the change grows with L (Dey et al. 2025, their depth coordinate check)."""
    torch.manual_seed(seed)
    model = GPT(cfg)
    last = model.blocks[-1]
    seen: dict[str, torch.Tensor] = {}
    hook = last.register_forward_hook(lambda _m, _i, o: seen.__setitem__("h", o.detach().clone()))
    x, y = batch[:, :-1], batch[:, 1:]
    with torch.no_grad():
        model(x)
    h0 = seen["h"]
    opt = build_adamw(model, OptimConfig(lr=lr, min_lr=0.0, weight_decay=0.0, warmup_steps=0), "cpu")
    for _ in range(steps):
        loss = nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    with torch.no_grad():
        logits = model(x)
    hook.remove()
    rms = lambda t: t.pow(2).mean().sqrt().item()  # noqa: E731
    return {"stream at init": rms(h0), "stream update": rms(seen["h"] - h0), "logits": rms(logits)}


def depth_check(
    cfg: GPTConfig, depths: list[int], lr: float, steps: int, seeds: int = 1, batch_size: int = 8
) -> dict[int, dict[str, float]]:
    """depth → stream_sizes (mean over seeds); cfg gives everything but n_layer."""
    return _over(cfg, "n_layer", depths, stream_sizes, lr, steps, seeds, batch_size)
