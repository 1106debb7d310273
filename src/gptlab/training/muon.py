"""torch.optim.Muon's update, batched over same-shape matrices, and skippable on a device flag.

torch's Muon (2.13) orthogonalises one matrix at a time: ~23 ops per matrix, 1,666 a step for
GPT-2's 72 hidden matrices, each a kernel launch and host time on a GPU. Its Newton–Schulz iteration
is the same for every matrix of one shape, so `BatchedMuon` stacks them and runs it once per shape:
`torch.baddbmm` in place of `torch.addmm`, the Frobenius norm per matrix (`_foreach_norm`), the
momentum, Nesterov blend, decoupled decay and step as torch computes them (lerp, then mul and add on
the float32 weights). Same formulas and dtypes, so on a CPU the weights and buffers equal torch's bit
for bit (tests/training/test_muon_batched.py; a batched GPU matmul may round a bfloat16 product
differently from a single one: bf16 rounding).

`found_inf` (a device tensor, nonzero = drop this step) is the non-finite guard's flag, as fused
AdamW reads it: the weights and momentum buffers keep their values through `torch.where`, without a
host read. State and groups are torch.optim.Muon's own (`momentum_buffer` per matrix), so checkpoints
load either way.

A 3-D parameter is a stack of matrices stored (n, in, out), as the MoE experts are (x @ W[e]): each
W[e] is orthogonalised on its own, exactly as torch.optim.Muon would treat the nn.Linear weight
W[e].T of shape (out, in) (Newton–Schulz commutes with the transpose; the LR rule reads (out, in)).
torch's constructor takes 2-D parameters only, so stacks join through `add_param_group`.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

# stack at most this many elements of one shape at once: the step's transients are about 12 bytes an
# element of the largest stack (16 with the guard's flag), so 2^24 bounds them near 200 MiB at any
# size; GPT-2 124M's 3072 × 768 matrices go 7 to a stack (tests/planning/test_planner.py)
MAX_STACK = 1 << 24


class BatchedMuon(torch.optim.Muon):
    """torch.optim.Muon with its update run per stack of same-shape matrices (module doc)."""

    found_inf: torch.Tensor | None = None

    def add_param_group(self, param_group: dict) -> None:
        """torch's, for 2-D matrices and (n, in, out) stacks of them (module doc)."""
        params = param_group["params"]
        for p in [params] if isinstance(params, torch.Tensor) else params:
            if p.ndim not in (2, 3):
                raise ValueError(
                    f"BatchedMuon takes matrices and stacks of matrices, not a tensor of size {p.size()}"
                )
        super().add_param_group(param_group)

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:  # type: ignore[override]
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        skip = None if self.found_inf is None else self.found_inf != 0
        for group in self.param_groups:
            for params in _stacks([p for p in group["params"] if p.grad is not None]):
                self._update(group, params, skip)
        return loss

    def _update(self, group: dict, params: list[torch.Tensor], skip: torch.Tensor | None) -> None:
        for p in params:
            if "momentum_buffer" not in self.state[p]:
                self.state[p]["momentum_buffer"] = torch.zeros_like(p, memory_format=torch.preserve_format)
        bufs = [self.state[p]["momentum_buffer"] for p in params]
        mu, lr, wd = group["momentum"], float(group["lr"]), group["weight_decay"]
        # in place on the stacked copies, each freed once used: the transients are those copies (the
        # planner measures them; docs/performance.md), so fewer alive at once is less peak memory
        update = torch.stack([p.grad for p in params])
        new_bufs = torch.stack(bufs)
        old_bufs = None if skip is None else new_bufs.clone()
        new_bufs.lerp_(update, 1 - mu)
        if group["nesterov"]:
            update.lerp_(new_bufs, mu)
        else:
            update = new_bufs
        # a 3-D parameter's matrices join the Newton–Schulz stack one by one: (k, n, A, B) -> (k·n, A, B)
        coefficients, steps, eps = group["ns_coefficients"], group["ns_steps"], group["eps"]
        ortho = newton_schulz(update.flatten(0, -3), coefficients, steps, eps).view_as(update)
        del update
        new = torch.stack(params)
        old = None if skip is None else new.clone()
        new.mul_(1 - lr * wd).add_(ortho, alpha=-_adjust_lr(lr, group["adjust_lr_fn"], params[0].shape))
        del ortho
        if skip is not None:  # the guard's drop, on the device: NaN never reaches weights or buffers
            new = torch.where(skip, old, new)
            new_bufs = torch.where(skip, old_bufs, new_bufs)
        torch._foreach_copy_(params, list(new.unbind(0)))
        torch._foreach_copy_(bufs, list(new_bufs.unbind(0)))


def newton_schulz(
    g: torch.Tensor, coefficients: tuple[float, float, float], steps: int, eps: float
) -> torch.Tensor:
    """torch's quintic Newton–Schulz (`torch.optim._muon._zeropower_via_newtonschulz`) on a stack
    (k, A, B) of matrices: bfloat16, wide side first, each matrix over its own Frobenius norm."""
    a, b, c = coefficients
    x = g.bfloat16()
    tall = g.size(-2) > g.size(-1)
    if tall:
        x = x.mT
    norms = torch.stack(torch._foreach_norm(list(x.unbind(0))))
    x = x / norms.clamp(min=eps)[:, None, None]
    for _ in range(steps):
        gram = x @ x.mT
        x = torch.baddbmm(x, torch.baddbmm(gram, gram, gram, beta=b, alpha=c), x, beta=a)
    return x.mT if tall else x


def _adjust_lr(lr: float, adjust_lr_fn: str | None, shape: torch.Size) -> float:
    """The step's LR for an (A, B) matrix, torch.optim.Muon's two rules: sqrt(max(1, A/B))
    (Jordan's, "original") or 0.2·sqrt(max(A, B)) (Moonlight's match_rms_adamw). A stack (n, in, out)
    is read as its nn.Linear weights (out, in)."""
    rows, cols = shape if len(shape) == 2 else (shape[-1], shape[-2])
    if adjust_lr_fn is None or adjust_lr_fn == "original":
        return lr * math.sqrt(max(1, rows / cols))
    return lr * (0.2 * math.sqrt(max(rows, cols)))


def _stacks(params: list[torch.Tensor]) -> list[list[torch.Tensor]]:
    """The parameters by shape (dtype and device too), in stacks of at most MAX_STACK elements."""
    by_shape: dict[tuple, list[torch.Tensor]] = {}
    for p in params:
        by_shape.setdefault((tuple(p.shape), p.dtype, p.device), []).append(p)
    out = []
    for same in by_shape.values():
        per = max(1, MAX_STACK // max(1, same[0].numel()))
        out.extend(same[i : i + per] for i in range(0, len(same), per))
    return out
