"""Parallelism lives here, not in the model: the Lightning strategy, FSDP2 sharding, compile."""

from __future__ import annotations

from typing import Any

import torch
from lightning.pytorch.strategies import DDPStrategy, ModelParallelStrategy, Strategy

from gptlab.config import STRATEGIES, TrainerConfig


def world_size(cfg: TrainerConfig, devices: int) -> int:
    return devices * cfg.num_nodes


def build_strategy(cfg: TrainerConfig, devices: int) -> Strategy | str:
    """auto (one device, or DDP when there are several) | ddp | fsdp (FSDP2, data parallel only)."""
    if cfg.strategy not in STRATEGIES:
        raise ValueError(f"trainer.strategy={cfg.strategy!r} is not accepted; choose one of {STRATEGIES}")
    if cfg.strategy == "fsdp":
        # data_parallel_size="auto" would mean number of nodes, with tensor parallel inside a node
        return ModelParallelStrategy(
            data_parallel_size=world_size(cfg, devices),
            tensor_parallel_size=1,
            save_distributed_checkpoint=True,
        )
    if cfg.strategy == "ddp" or world_size(cfg, devices) > 1:
        return DDPStrategy(gradient_as_bucket_view=True)
    return "auto"


def parallelize(module: Any, fsdp: dict[str, Any] | None, compile_model: bool) -> None:
    """Called from LightningModule.configure_model: shard each block, then the root, then compile."""
    model = module.model
    if getattr(model, "_gptlab_parallelized", False):
        return
    mesh = getattr(module, "device_mesh", None) if isinstance(module.trainer.strategy, ModelParallelStrategy) else None
    if mesh is not None:
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

        fsdp = fsdp or {}
        dp_mesh = mesh["data_parallel"]
        on_gpu = module.trainer.strategy.root_device.type == "cuda"
        mp = (
            MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
            if fsdp.get("mixed_precision", True) and on_gpu
            else MixedPrecisionPolicy()
        )
        reshard = bool(fsdp.get("reshard_after_forward", True))
        for block in model.blocks:
            if fsdp.get("activation_checkpointing", False):
                from torch.distributed._composable import checkpoint

                checkpoint(block)
            fully_shard(block, mesh=dp_mesh, mp_policy=mp, reshard_after_forward=reshard)
        # the tied embedding / head stay together in the root unit
        fully_shard(model, mesh=dp_mesh, mp_policy=mp, reshard_after_forward=reshard)
        if any(p.is_meta for p in model.parameters()):
            model.to_empty(device=module.trainer.strategy.root_device)
            model.reset_parameters()
    if compile_model:
        compile_blocks(model)
    model._gptlab_parallelized = True


def compile_blocks(model: Any) -> None:
    """torch.compile each block in place: identical blocks share one graph, and FSDP2's per-block
    hooks stay outside the compiled regions (also what gptlab.analysis.bench's bare loop runs)."""
    for block in model.blocks:
        block.compile()
