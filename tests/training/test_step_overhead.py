"""The training step's per-step shortcuts (docs/performance.md, "Short runs"): a dense model's objective
never walks the modules for expert layers, and an MoE model's objective still carries the routers'
terms, written out here from each layer's own aux and z (router_z_loss·z, plus aux_loss_coef·aux
under balance=aux_loss), not through gptlab.model.moe's sum."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from gptlab.config import OptimConfig
from gptlab.model import GPTConfig, moe
from gptlab.model.moe_config import MoEConfig
from gptlab.training.module import GPTLightningModule

BATCH = torch.randint(0, 64, (2, 17), generator=torch.Generator().manual_seed(3))


def _module(**model: object) -> GPTLightningModule:
    torch.manual_seed(0)
    cfg = GPTConfig(vocab_size=64, block_size=16, n_layer=2, n_head=2, n_embd=32, **model)  # type: ignore[arg-type]
    return GPTLightningModule(model=dataclasses.asdict(cfg), optim=dataclasses.asdict(OptimConfig()))


def test_dense_objective_does_not_look_for_experts(monkeypatch: pytest.MonkeyPatch) -> None:
    module = _module()

    def walked(_: object) -> list:
        raise AssertionError("a dense model's step walked its modules for MoE layers")

    monkeypatch.setattr(moe, "moe_layers", walked)
    assert not module.has_moe
    assert torch.equal(module._loss(BATCH), module.last_ce)  # the objective is the cross-entropy alone


def test_moe_objective_adds_every_layers_routing_terms() -> None:
    module = _module(ffn="moe", moe=MoEConfig(n_experts=4, top_k=2, first_dense_layers=1))
    got = module._loss(BATCH)
    layers = [b.ffn for b in module.model.blocks if isinstance(b.ffn, moe.MoE)]
    assert module.has_moe and len(layers) == 1  # block 0 dense (first_dense_layers=1)
    want = module.last_ce.clone()
    for layer in layers:
        want = want + layer.mcfg.router_z_loss * layer.z_loss + layer.mcfg.aux_loss_coef * layer.aux_loss
    assert float(got.detach() - module.last_ce) > 0
    assert float(got.detach()) == pytest.approx(float(want.detach()), rel=1e-6)
