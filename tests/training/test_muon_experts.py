"""optim=muon with model/ffn=moe (issue 47, item 6): each expert's matrix orthogonalised on its own.

Oracle: torch.optim.Muon itself, run on each expert as the nn.Linear weight it would be (W[e].T, of
shape (out, in)) and fed the transposed gradients: the stacked update must equal it expert by expert.
Non-square experts make the LR rule's orientation matter (`original` scales by sqrt(max(1, out/in))).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from gptlab.compose import compose_config
from gptlab.config import OptimConfig
from gptlab.model import GPT
from gptlab.training.muon import BatchedMuon
from gptlab.training.optim import build_optimizer
from tests.training.rel_harness import train_here

E, D, H = 4, 24, 40  # experts, model width, expert hidden: up (E, D, H), down (E, H, D)
SETTINGS = [
    dict(nesterov=True, adjust_lr_fn="match_rms_adamw", momentum=0.95),
    dict(nesterov=False, adjust_lr_fn="original", momentum=0.9),
]


@pytest.mark.parametrize("kw", SETTINGS, ids=["nesterov-match_rms", "plain-original"])
def test_each_expert_steps_as_torch_muon_steps_its_linear_weight(kw: dict) -> None:
    g = torch.Generator().manual_seed(0)
    stacks = [
        torch.nn.Parameter(torch.randn(E, D, H, generator=g)),
        torch.nn.Parameter(torch.randn(E, H, D, generator=g)),
    ]
    linears = [torch.nn.Parameter(s.detach()[e].T.clone()) for s in stacks for e in range(E)]
    ours = BatchedMuon([torch.nn.Parameter(torch.randn(D, D, generator=g))], lr=0.02, weight_decay=0.1, **kw)
    ours.add_param_group({"params": stacks})
    ref = torch.optim.Muon(linears, lr=0.02, weight_decay=0.1, **kw)
    for step in range(4):
        grads = [torch.randn(s.shape, generator=g) * (1 + step) for s in stacks]
        for s, grad in zip(stacks, grads, strict=True):
            s.grad = grad.clone()
        for i, lin in enumerate(linears):
            lin.grad = grads[i // E][i % E].T.clone()
        for opt in (ours, ref):
            for group in opt.param_groups:
                group["lr"] = 0.02 * (step + 1) / 4
            opt.step()
        for i, lin in enumerate(linears):
            got = stacks[i // E].detach()[i % E].T
            torch.testing.assert_close(got, lin.detach(), rtol=1e-6, atol=1e-6, msg=f"step {step} matrix {i}")


def test_a_tensor_that_is_no_matrix_is_refused() -> None:
    opt = BatchedMuon([torch.nn.Parameter(torch.zeros(3, 3))])
    with pytest.raises(ValueError, match="matrices and stacks of matrices"):
        opt.add_param_group({"params": [torch.nn.Parameter(torch.zeros(3))]})


def test_build_muon_puts_experts_and_shared_experts_on_muon_and_the_router_on_adamw() -> None:
    cfg = compose_config(
        ["model/ffn=moe", "model.moe.n_shared=1", "model.n_layer=2", "model.n_embd=32", "model.n_head=2"]
    )
    model = GPT(cfg.model)
    opt = build_optimizer(model, OptimConfig(name="muon"), "cpu")
    on_muon = {id(p) for group in opt.muon.param_groups for p in group["params"]}
    names = {n for n, p in model.named_parameters() if id(p) in on_muon}
    assert {f"blocks.{i}.ffn.experts.{w}_proj" for i in range(2) for w in ("gate", "up", "down")} <= names
    assert {
        f"blocks.{i}.ffn.shared.{w}_proj.weight" for i in range(2) for w in ("gate", "up", "down")
    } <= names
    assert not any("router" in n or "emb" in n or "norm" in n for n in names), names
    on_adamw = {id(p) for group in opt.adamw.param_groups for p in group["params"]}
    assert on_adamw.isdisjoint(on_muon) and len(on_adamw | on_muon) == len(list(model.parameters()))


def test_train_py_trains_moe_under_muon(tmp_path: Path, cache: Path) -> None:
    metrics = train_here(
        tmp_path, cache, "model/ffn=moe", "model.moe.n_experts=4", "optim=muon", "trainer.max_steps=2"
    )
    assert metrics["status"] == "finished", metrics
