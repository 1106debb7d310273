"""FSDP2's root stays unsharded after forward (training.strategies.shard_blocks_then_root), and the
planner's peak holds its bf16 copy.

Checked on FSDP2 itself: after a forward over a fake 4-rank group, the parameters registered on a
module are DTensor shards when FSDP2 resharded it and plain full-size tensors when it did not
(`fully_shard`'s docstring: "The registered parameters are the sharded parameters if True;
unsharded parameters if False"). The root's bf16 copy is counted from the model's own shapes.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor
from torch.testing._internal.distributed.fake_pg import FakeStore

from gptlab.config import OptimConfig
from gptlab.model import GPT, GPTConfig
from gptlab.planning.step import Setup, measure
from gptlab.training.strategies import mixed_precision_policy, shard_blocks_then_root

SHAPE = {"n_layer": 2, "n_head": 4, "n_embd": 64, "block_size": 32, "vocab_size": 4096}


def test_root_is_not_resharded_after_forward_and_blocks_are() -> None:
    cfg = GPTConfig.from_dict({**SHAPE, "tie_embeddings": False})
    dist.init_process_group("fake", rank=0, world_size=4, store=FakeStore())
    try:
        mesh = init_device_mesh("cpu", (4,))
        model = GPT(cfg)
        shard_blocks_then_root(model, mesh, mixed_precision_policy("bf16-mixed", True), True)
        model(torch.randint(0, cfg.vocab_size, (2, cfg.block_size)))
        root = [p for n, p in model.named_parameters(remove_duplicate=False) if not n.startswith("blocks.")]
        blocks = [p for p in model.blocks.parameters()]
        assert root and all(not isinstance(p, DTensor) for p in root)
        assert all(p.dtype == torch.bfloat16 for p in root)  # the all-gathered bf16 copy
        assert blocks and all(isinstance(p, DTensor) for p in blocks)
    finally:
        dist.destroy_process_group()


def test_planner_peak_holds_the_root_bf16_copy() -> None:
    """A model whose peak is at the loss (4096 ids): FSDPMemTracker's unsharded parameters at the
    peak are exactly the root's (embedding, final norm, head) in bf16, 2 bytes each."""
    cfg = GPTConfig.from_dict({**SHAPE, "tie_embeddings": False})
    with torch.device("meta"):
        model = GPT(cfg)
    root = sum(p.numel() for n, p in model.named_parameters() if not n.startswith("blocks."))
    m = measure(Setup(cfg, OptimConfig(), 4, world_size=4, fsdp=True))
    assert m.tracker["Unsharded Param"] == 2 * root
