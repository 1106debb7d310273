"""model/ffn=moe under torch.compile (one graph, no break, no recompile as the routing changes) and
under activation checkpointing (the same gradients, balancing terms included)."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F

from gptlab.model import GPT, GPTConfig, moe
from gptlab.training.strategies import compile_blocks

SHAPE = {"n_layer": 2, "n_embd": 16, "n_head": 2, "block_size": 16, "vocab_size": 64, "ffn": "moe"}
MOE = {"n_experts": 4, "top_k": 2, "expert_hidden": 24, "n_shared": 1}


def build(**extra: Any) -> GPT:
    torch.manual_seed(0)
    return GPT(GPTConfig.from_dict({**SHAPE, "moe": dict(MOE), **extra}))


def step(model: GPT, seed: int, bf16: bool = False) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """One forward + backward of CE + the routers' penalty; returns the loss and the gradients."""
    idx = torch.randint(0, 64, (2, 17), generator=torch.Generator().manual_seed(seed))
    model.zero_grad(set_to_none=True)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        logits = model(idx[:, :-1])
    loss = F.cross_entropy(logits.float().reshape(-1, 64), idx[:, 1:].reshape(-1)) + moe.routing_loss(model)
    loss.backward()
    return loss.detach(), [p.grad.clone() for p in model.parameters()]  # type: ignore[union-attr]


@pytest.mark.parametrize("bf16", [False, True], ids=["fp32_loop", "bf16_grouped"])
def test_compiled_blocks_one_graph_no_break(monkeypatch: pytest.MonkeyPatch, bf16: bool) -> None:
    """fp32 takes the loop path (sizes traced as unbacked symbols), bf16 autocast the grouped one
    (torch._grouped_mm); three steps of different routing reuse the first graph. Dynamo's tracing
    is what decides breaks and recompiles, so the eager backend keeps this cheap."""
    original = torch.nn.Module.compile
    monkeypatch.setattr(torch.nn.Module, "compile", lambda self, **kw: original(self, backend="eager"))
    eager, compiled = build(), build()
    torch._dynamo.reset()
    counters = torch._dynamo.utils.counters
    counters.clear()
    compile_blocks(compiled)
    try:
        loads = []
        for seed in range(3):
            ref_loss, ref_grads = step(eager, seed, bf16)
            loss, grads = step(compiled, seed, bf16)
            loads.append(moe.moe_layers(compiled)[0].load.tolist())  # type: ignore[union-attr]
            torch.testing.assert_close(loss, ref_loss)
            for g, r in zip(grads, ref_grads, strict=True):
                torch.testing.assert_close(g, r)
        seen = {k: dict(v) for k, v in counters.items()}
    finally:
        torch._dynamo.config.capture_scalar_outputs = False
        torch._dynamo.reset()
    assert len({tuple(x) for x in loads}) > 1, "the routing should differ between steps"
    assert not seen.get("graph_break"), seen
    assert seen["stats"]["unique_graphs"] == 1, seen


def test_activation_checkpointing_same_gradients() -> None:
    """Backward re-runs each block; the routing (and the aux and z losses held outside the
    checkpointed call's output) must give the gradients of the run that kept its activations."""
    plain, checkpointed = build(), build(activation_checkpointing="full")
    checkpointed.load_state_dict(plain.state_dict())
    loss, grads = step(plain, 0)
    loss_ckpt, grads_ckpt = step(checkpointed, 0)
    torch.testing.assert_close(loss_ckpt, loss)
    router = [i for i, (n, _) in enumerate(plain.named_parameters()) if "router" in n]
    assert router and all(grads[i].abs().sum() > 0 for i in router)
    for g, r in zip(grads_ckpt, grads, strict=True):
        torch.testing.assert_close(g, r)
