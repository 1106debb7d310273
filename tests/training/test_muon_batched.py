"""optim.name=muon on a GPU: the Newton–Schulz step batched over same-shape matrices, and the
non-finite guard's drop kept on the device (issue 43, item 4).

Oracles: `torch.optim.Muon` itself (torch's own per-matrix implementation, fed the same gradients)
for the batched update, bit for bit on a CPU; and the weights and state before a dropped step for the
drop. The host-read test builds the CUDA configuration (`build_optimizer(..., "cuda")`: fused AdamW,
which runs on CPU tensors too) and spies on every host read of a tensor through the guard and the
step, as tests/bench/test_hot_path.py does for the whole loop (without its CPU-only exemptions:
here every read counts, the guard's included).
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from gptlab.config import OptimConfig
from gptlab.model import GPT, GPTConfig
from gptlab.training.callbacks.nonfinite import NonFiniteGuard
from gptlab.training.muon import BatchedMuon
from gptlab.training.optim import build_optimizer, is_muon_param
from tests.bench.test_hot_path import HOST_READS

# wide, tall and square matrices, several of each shape (so stacks of more than one), and one alone
SHAPES = [(32, 48)] * 3 + [(48, 32)] * 2 + [(40, 40)] * 4 + [(24, 56)]
SETTINGS = [
    dict(nesterov=True, adjust_lr_fn="match_rms_adamw", momentum=0.95),
    dict(nesterov=False, adjust_lr_fn="original", momentum=0.9),
]


def twins(seed: int = 0) -> tuple[list[torch.nn.Parameter], list[torch.nn.Parameter]]:
    g = torch.Generator().manual_seed(seed)
    first = [torch.nn.Parameter(torch.randn(*s, generator=g)) for s in SHAPES]
    return first, [torch.nn.Parameter(p.detach().clone()) for p in first]


def set_grads(params: list[torch.nn.Parameter], seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    for p in params:
        p.grad = torch.randn(p.shape, generator=g) * (1 + seed % 3)


@pytest.mark.parametrize("kw", SETTINGS, ids=["nesterov-match_rms", "plain-original"])
def test_batched_muon_equals_torch_muon_bit_for_bit(kw: dict) -> None:
    ours_p, torch_p = twins()
    ours = BatchedMuon(ours_p, lr=0.02, weight_decay=0.1, **kw)
    ref = torch.optim.Muon(torch_p, lr=0.02, weight_decay=0.1, **kw)
    for step in range(4):
        for params in (ours_p, torch_p):
            set_grads(params, step)
        for opt in (ours, ref):
            opt.param_groups[0]["lr"] = 0.02 * (step + 1) / 4  # a schedule moves the LR
            opt.step()
        for i, (a, b) in enumerate(zip(ours_p, torch_p, strict=True)):
            assert torch.equal(a, b), (step, i, SHAPES[i], float((a - b).abs().max()))
            assert torch.equal(ours.state[a]["momentum_buffer"], ref.state[b]["momentum_buffer"])
    # the same state layout: torch's Muon takes our state dict and goes on identically
    again = torch.optim.Muon(torch_p, lr=0.02, weight_decay=0.1, **kw)
    again.load_state_dict(ours.state_dict())
    assert again.state_dict()["state"].keys() == ref.state_dict()["state"].keys()


def test_a_flagged_step_leaves_weights_and_buffers_and_the_next_equals_torch() -> None:
    """found_inf = 1 with NaN gradients: nothing moves; the next good step equals torch's Muon,
    which never saw the bad step."""
    ours_p, torch_p = twins(1)
    ours, ref = BatchedMuon(ours_p, lr=0.02), torch.optim.Muon(torch_p, lr=0.02)
    set_grads(ours_p, 0)
    set_grads(torch_p, 0)
    ours.step()
    ref.step()
    before = [p.detach().clone() for p in ours_p]
    bufs = [ours.state[p]["momentum_buffer"].clone() for p in ours_p]
    for p in ours_p:
        p.grad = torch.full_like(p, float("nan"))
    ours.found_inf = torch.ones(())
    ours.step()
    for p, w, b in zip(ours_p, before, bufs, strict=True):
        assert torch.equal(p, w) and torch.equal(ours.state[p]["momentum_buffer"], b)
    ours.found_inf = torch.zeros(())
    set_grads(ours_p, 1)
    set_grads(torch_p, 1)
    ours.step()
    ref.step()
    for a, b in zip(ours_p, torch_p, strict=True):
        assert torch.equal(a, b)


class Reads(TorchFunctionMode):
    """Every host read of a tensor (test_hot_path's list) made inside the mode."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        name = getattr(func, "__name__", "")
        if name in HOST_READS or (name == "tensor" and "device" in (kwargs or {})):
            self.seen.append(name)
        return func(*args, **(kwargs or {}))


def tiny() -> GPT:
    torch.manual_seed(0)
    return GPT(GPTConfig(n_layer=2, n_embd=32, n_head=2, block_size=16, vocab_size=64))


def backward(model: GPT, poison: bool = False) -> None:
    batch = torch.randint(0, 64, (2, 17), generator=torch.Generator().manual_seed(0))
    F.cross_entropy(model(batch[:, :-1]).reshape(-1, 64), batch[:, 1:].reshape(-1)).backward()
    if poison:
        next(p for n, p in model.named_parameters() if is_muon_param(n)).grad[0, 0] = float("inf")


def test_the_cuda_configuration_steps_without_a_host_read() -> None:
    """Guard and step as the module runs them on a GPU with optim=muon: no tensor read on the host
    (before this fix the guard's `bool(bad)` ran every step: one sync a step)."""
    model = tiny()
    opt = build_optimizer(model, OptimConfig(name="muon", lr=1e-2), "cuda")
    guard = NonFiniteGuard()
    for step in range(3):
        backward(model)
        with Reads() as reads:
            guard.total_norm(model.named_parameters(), opt, step)
            opt.step()
            opt.zero_grad()
        assert not reads.seen, (step, reads.seen)


def test_the_cuda_configuration_drops_a_non_finite_step_on_the_device() -> None:
    model = tiny()
    opt = build_optimizer(model, OptimConfig(name="muon", lr=1e-2), "cuda")
    guard = NonFiniteGuard()
    backward(model)
    guard.total_norm(model.named_parameters(), opt, 0)
    opt.step()
    opt.zero_grad()
    weights = {n: p.detach().clone() for n, p in model.named_parameters()}
    state = {(id(p), k): v.clone() for p, s in opt.state.items() for k, v in s.items()}
    backward(model, poison=True)
    guard.total_norm(model.named_parameters(), opt, 1)
    opt.step()
    for n, p in model.named_parameters():
        assert torch.equal(p, weights[n]), n
    after = {(id(p), k): v for p, s in opt.state.items() for k, v in s.items()}
    assert after.keys() == state.keys() and all(torch.equal(after[k], v) for k, v in state.items())
    assert guard.seen() == 1
