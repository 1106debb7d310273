"""The reference the Lightning path is measured against: a plain PyTorch training loop doing the same
work (same GPT and seed, AdamW of `gptlab.training.optim`, schedule, clipping, DataLoader)."""

from __future__ import annotations

import contextlib
import time

import lightning as L
import torch

from gptlab.bench.timing import Marks, Timing, counters, sync, timing, window_end
from gptlab.config import TrainConfig
from gptlab.data.datamodule import TokenDataModule
from gptlab.model import GPT, GPTConfig


def autocast(device: torch.device, precision: str) -> contextlib.AbstractContextManager:
    """bf16 autocast for "bf16-mixed", nothing for "32-true" (the two precisions benchmarked)."""
    if precision == "bf16-mixed":
        return torch.autocast(device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def bare_run(
    cfg: TrainConfig,
    model_cfg: GPTConfig,
    device: torch.device,
    precision: str,
    warmup: int,
    steps: int,
    losses: list[torch.Tensor] | None = None,
) -> Timing:
    """A plain loop: same GPT, AdamW, schedule, clipping and DataLoader as the LightningModule.
    `losses`, when given, receives every step's loss (detached, on the device: no sync)."""
    from gptlab.training.loss import loss_fn
    from gptlab.training.optim import build_adamw, lr_factor
    from gptlab.training.strategies import compile_blocks

    L.seed_everything(cfg.seed, workers=True, verbose=False)
    model = GPT(model_cfg).to(device)
    if cfg.compile:
        compile_blocks(model)
    model.train()
    objective = loss_fn(bool(cfg.compile))  # the LightningModule's loss, compiled with the blocks
    opt = build_adamw(model, cfg.optim, device.type)
    schedule = torch.optim.lr_scheduler.LambdaLR(opt, lr_factor(cfg.optim, warmup + steps))
    dm = TokenDataModule(cfg.data, block_size=model_cfg.block_size, seed=cfg.seed)
    loader = dm.train_dataloader()
    clip = cfg.optim.grad_clip
    stamps: list[float] = []
    marks: list[Marks] = []
    batches = iter(loader)
    for k in range(warmup + steps):
        try:
            batch = next(batches)
        except StopIteration:  # a small corpus: start the stream again
            batches = iter(loader)
            batch = next(batches)
        batch = batch.to(device, non_blocking=True)
        with autocast(device, precision):
            logits = model(batch[:, :-1])
            loss, _ = objective(logits, batch[:, 1:], 0.0)
        loss.backward()
        if losses is not None:
            losses.append(loss.detach())
        del logits, loss  # as Lightning's loop does: the next forward can reuse their memory
        # the Lightning path's work: the global norm every step (its non-finite guard drops a bad
        # update, with a host read on a non-fused optimizer), then the clip when one is set
        params = [p for p in model.parameters() if p.grad is not None]
        total = torch.nn.utils.get_total_norm([p.grad for p in params], foreach=True)
        if clip > 0:
            torch.nn.utils.clip_grads_with_norm_(params, clip, total, foreach=True)
        if not opt.defaults.get("fused") and not bool(torch.isfinite(total)):
            opt.zero_grad(set_to_none=True)
        opt.step()
        opt.zero_grad(set_to_none=True)
        schedule.step()
        if window_end(k, warmup, steps):
            sync(device)
            marks.append(counters())
        stamps.append(time.perf_counter())
    return timing(stamps, marks, warmup, steps)
