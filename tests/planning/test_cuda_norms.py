"""The planner's norms as CUDA runs them (gptlab.planning.norms), against torch's own LayerNorm.

On CUDA, RMSNorm is `aten::_fused_rms_norm`, whose autograd formula (torch derivatives.yaml) keeps
the input, rstd and the weight for backward; LayerNorm is `aten::native_layer_norm`, whose formula
keeps the input, mean, rstd, weight and bias, on CPU as on CUDA (torch's own kernel here, not the
planner's code). So a CUDA step's RMSNorm keeps exactly LayerNorm's tensors less the mean: one fp32
per row and norm. The CPU decomposition keeps an fp32 copy more per norm (`x * rstd`).
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.nn.functional as F

from gptlab.config import OptimConfig
from gptlab.model import GPT, GPTConfig
from gptlab.planning.norms import as_cuda
from gptlab.planning.step import Setup, measure

SHAPE = {"n_layer": 2, "n_head": 4, "n_embd": 64, "block_size": 32, "vocab_size": 4096, "bias": False}
B = 4


def activations(norm: str, device: str, fsdp: bool) -> int:
    cfg = GPTConfig.from_dict({**SHAPE, "norm": norm})
    setup = Setup(cfg, OptimConfig(), B, world_size=4 if fsdp else 1, fsdp=fsdp, device=device)
    return measure(setup).activations


@pytest.mark.parametrize("fsdp", [False, True], ids=["one_device", "fsdp2_bf16"])
def test_cuda_rmsnorm_keeps_layernorm_less_its_mean(fsdp: bool) -> None:
    """bf16-mixed; one device (fp32 stream) and FSDP2 with bf16 parameters (bf16 stream, which
    CUDA autocast upcasts for either norm). Pre-norm: 2 norms a block and the final one, all alive
    at the step's peak (the loss: 4096 ids make the logits its largest tensors)."""
    L, rows = SHAPE["n_layer"], B * SHAPE["block_size"]
    means = (2 * L + 1) * rows * 4
    rms, ln = activations("rmsnorm", "cuda", fsdp), activations("layernorm", "cuda", fsdp)
    assert ln - rms == means
    # as CPU runs it: the fp32 product x * rstd too (with the fp32 stream of one device, exactly
    # that more; with FSDP2's bf16 stream, CPU's bf16 norm output also spares CUDA's fp32 output
    # its bf16 casts, so only more)
    cpu_rms = activations("rmsnorm", "cpu", fsdp)
    if fsdp:
        assert cpu_rms > rms
    else:
        assert cpu_rms - rms == (2 * L + 1) * rows * SHAPE["n_embd"] * 4


def test_cuda_norms_compute_what_torch_norms_compute() -> None:
    """The swapped forwards train the same model: loss and every gradient equal to the plain
    model's on real tensors (fp32, and bf16 autocast), and the swap is undone on exit."""
    cfg = GPTConfig.from_dict({**SHAPE, "qk_norm": True})
    torch.manual_seed(0)
    model = GPT(cfg)
    batch = torch.randint(0, cfg.vocab_size, (B, cfg.block_size + 1))

    def step(amp: bool) -> tuple[torch.Tensor, list[torch.Tensor]]:
        model.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
            logits = model(batch[:, :-1])
        loss = F.cross_entropy(logits.float().flatten(0, 1), batch[:, 1:].flatten())
        loss.backward()
        return loss.detach(), [p.grad.clone() for p in model.parameters()]

    for amp in (False, True):
        ref_loss, ref_grads = step(amp)
        with as_cuda(model):
            loss, grads = step(amp)
        tol = {"rtol": 2e-2, "atol": 2e-3} if amp else {"rtol": 1e-5, "atol": 1e-6}
        torch.testing.assert_close(loss, ref_loss, **tol)
        for g, r in zip(grads, ref_grads, strict=True):
            torch.testing.assert_close(g, r, **tol)
    assert not any("forward" in vars(m) for m in model.modules())


def test_a_cpu_plan_is_the_old_accounting() -> None:
    """device="cpu" swaps nothing: the fake step's norms are the CPU's own."""
    cfg = GPTConfig.from_dict(SHAPE)
    s = Setup(cfg, OptimConfig(), B, device="cpu")
    assert measure(s).activations > measure(dataclasses.replace(s, device="cuda")).activations
    with pytest.raises(ValueError, match="device='tpu'"):
        Setup(cfg, OptimConfig(), B, device="tpu")
