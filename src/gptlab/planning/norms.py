"""The model's norms as a CUDA step runs them, for a fake step that runs on CPU.

Two things differ between a CPU and a CUDA training step, and both change what a norm keeps alive
for backward (the planner plans for CUDA GPUs; its fake step runs on CPU):

- `F.rms_norm` always calls `aten::_fused_rms_norm` (torch's `rms_norm_symint`, when the input and
  weight dtypes match). CUDA has a kernel for it, whose autograd formula (derivatives.yaml) saves
  the input, `rstd` (fp32, one value per row) and the weight. CPU has none: the op decomposes into
  upcast, pow, mean, rsqrt and two muls, and autograd saves the fp32 upcast and the fp32 product
  `x * rstd` -- two fp32 copies of the input.
- CUDA autocast runs `rms_norm` and `layer_norm` in fp32 (autocast_mode.h's fp32 list): a bf16
  input is upcast, and the fp32 copy is what the norm saves. CPU autocast runs both in the input's
  dtype (under FSDP2's bf16 parameters, the bf16 residual stream).

`as_cuda(model)` swaps every `nn.RMSNorm` and `nn.LayerNorm` forward for one that does what CUDA
does: under autocast, cast to fp32 first; then RMSNorm through `_FusedRMSNorm`, which saves what the
CUDA kernel's autograd saves. Values are those of `F.rms_norm` (it computes them with it, under
no_grad), so a real-tensor step still trains; the planner runs it on fake tensors only.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch._subclasses.fake_tensor import FakeTensor


class _FusedRMSNorm(torch.autograd.Function):
    """RMSNorm whose backward keeps what CUDA's `_fused_rms_norm` keeps: input, rstd, weight."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, weight: torch.Tensor | None, shape: list[int], eps: float) -> Any:
        out, rstd = torch.ops.aten._fused_rms_norm(x, shape, weight, eps)
        ctx.save_for_backward(x, rstd, weight)
        ctx.shape, ctx.eps = shape, eps
        return out

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> Any:
        x, rstd, weight = ctx.saved_tensors
        mask = [ctx.needs_input_grad[0], weight is not None and ctx.needs_input_grad[1]]
        if isinstance(x, FakeTensor):
            # the CUDA backward op (a meta kernel here: the shapes and dtypes CUDA's returns)
            gx, gw = torch.ops.aten._fused_rms_norm_backward(grad, x, ctx.shape, rstd, weight, mask)
        else:  # real CPU tensors have no kernel for it: differentiate the composite instead
            with torch.enable_grad():
                xs = x.detach().requires_grad_(mask[0])
                ws = weight.detach().requires_grad_(mask[1]) if weight is not None else None
                y = F.rms_norm(xs, ctx.shape, ws, ctx.eps)
                wanted = [t for t, m in zip((xs, ws), mask, strict=True) if m]
                got = iter(torch.autograd.grad(y, wanted, grad))
            gx, gw = (next(got) if mask[0] else None), (next(got) if mask[1] else None)
        return gx, gw, None, None


def _upcast(t: torch.Tensor | None) -> torch.Tensor | None:
    """CUDA autocast's fp32 policy: floating tensors below fp32 become fp32; others pass."""
    if t is not None and t.is_floating_point() and t.dtype != torch.float64:
        return t.float()
    return t


def _rms_norm(module: nn.RMSNorm, x: torch.Tensor) -> torch.Tensor:
    weight = module.weight
    if torch.is_autocast_enabled("cpu"):  # the fake step's autocast stands for CUDA's
        x, weight = _upcast(x), _upcast(weight)
    with torch.autocast("cpu", enabled=False):
        if weight is not None and weight.dtype != x.dtype:
            return F.rms_norm(x, module.normalized_shape, weight, module.eps)  # torch's composite too
        eps = module.eps if module.eps is not None else torch.finfo(x.dtype).eps
        return _FusedRMSNorm.apply(x, weight, list(module.normalized_shape), eps)


def _layer_norm(module: nn.LayerNorm, x: torch.Tensor) -> torch.Tensor:
    weight, bias = module.weight, module.bias
    if torch.is_autocast_enabled("cpu"):
        x, weight, bias = _upcast(x), _upcast(weight), _upcast(bias)
    with torch.autocast("cpu", enabled=False):
        return F.layer_norm(x, module.normalized_shape, weight, bias, module.eps)


@contextlib.contextmanager
def as_cuda(model: nn.Module) -> Iterator[None]:
    """Within the block, `model`'s RMSNorm and LayerNorm modules run as on CUDA (module docstring)."""
    swapped = []
    for m in model.modules():
        if isinstance(m, nn.RMSNorm):
            m.forward = _rms_norm.__get__(m)
        elif isinstance(m, nn.LayerNorm):
            m.forward = _layer_norm.__get__(m)
        else:
            continue
        swapped.append(m)
    try:
        yield
    finally:
        for m in swapped:
            del m.forward
