"""optim.z_loss: the objective is CE + c·mean(log²Z), value and gradient, against the formula here."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from gptlab.config import OptimConfig
from gptlab.model import GPTConfig
from gptlab.training.module import GPTLightningModule


def formula(logits: torch.Tensor, targets: torch.Tensor, c: float) -> torch.Tensor:
    """PaLM's auxiliary loss written out: log Z = m + log Σ exp(l - m), per position."""
    flat = logits.float().reshape(-1, logits.size(-1))
    m = flat.max(dim=-1, keepdim=True).values
    log_z = m.squeeze(-1) + (flat - m).exp().sum(-1).log()
    nll = log_z - flat.gather(1, targets.reshape(-1, 1)).squeeze(1)
    return nll.mean() + c * log_z.pow(2).mean()


@pytest.mark.parametrize("c", [0.0, 1e-4, 0.5])
def test_objective_and_gradient_equal_the_formula(c: float) -> None:
    torch.manual_seed(0)
    cfg = GPTConfig(vocab_size=64, block_size=16, n_layer=2, n_head=2, n_embd=32)
    module = GPTLightningModule(
        model=dataclasses.asdict(cfg), optim=dataclasses.asdict(OptimConfig(z_loss=c))
    )
    with torch.no_grad():  # a head that puts log Z far from 0, so the term is not negligible
        module.model.lm_head.weight.add_(0.3)
    batch = torch.randint(0, 64, (4, 17), generator=torch.Generator().manual_seed(1))
    got = module._loss(batch)
    params = list(module.model.parameters())
    got_grads = torch.autograd.grad(got, params)
    want = formula(module.model(batch[:, :-1]), batch[:, 1:], c)
    want_grads = torch.autograd.grad(want, params)
    assert float(got) == pytest.approx(float(want), rel=1e-5)
    for g, w in zip(got_grads, want_grads, strict=True):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-7)
    # train/loss stays the cross-entropy whatever c (runs with and without z-loss compare)
    assert float(module.last_ce) == pytest.approx(
        float(formula(module.model(batch[:, :-1]), batch[:, 1:], 0.0)), rel=1e-5
    )
    if c > 0:
        assert float(got) > float(module.last_ce) * (1 + 1e-6)
