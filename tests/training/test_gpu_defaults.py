"""GPU defaults (issue 43): compile on for a GPU accelerator unless told, TF32 for fp32 matmuls on a
GPU only, and the compiled loss equal to torch's eager cross-entropy (+ z-loss)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from gptlab.compose import compose_config
from gptlab.training.gpu_defaults import enable_tf32, resolve_compile
from gptlab.training.loss import loss_fn, token_losses


@pytest.mark.parametrize(
    ("compile", "accelerator", "expected"),
    [
        (None, "gpu", True),
        (None, "cuda", True),
        (None, "cpu", False),
        (False, "gpu", False),
        (True, "cpu", True),
    ],
)
def test_compile_resolves_on_for_a_gpu_unless_told(
    compile: bool | None, accelerator: str, expected: bool
) -> None:
    assert resolve_compile(compile, accelerator) is expected


def test_trainer_gpu_composes_with_compile_on() -> None:
    cfg = compose_config(["trainer=gpu"])
    assert cfg.compile is None and resolve_compile(cfg.compile, cfg.trainer.accelerator) is True
    assert resolve_compile(compose_config([]).compile, "cpu") is False  # the CPU default stays eager
    assert compose_config(["trainer=gpu", "compile=false"]).compile is False


def test_tf32_on_a_gpu_only() -> None:
    before = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("highest")
        assert enable_tf32("cpu") is False and torch.get_float32_matmul_precision() == "highest"
        assert enable_tf32("gpu") is True and torch.get_float32_matmul_precision() == "high"
    finally:
        torch.set_float32_matmul_precision(before)


@pytest.mark.parametrize("z_coef", [0.0, 1e-4])
def test_token_losses_equal_torch_cross_entropy(z_coef: float) -> None:
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(2, 5, 11, generator=g, dtype=torch.bfloat16)
    y = torch.randint(0, 11, (2, 5), generator=g)
    ce, z = token_losses(logits, y, z_coef)
    flat = logits.double().reshape(-1, 11)  # the oracle, in float64
    assert torch.allclose(ce.double(), F.cross_entropy(flat, y.reshape(-1)), rtol=1e-6)
    if z_coef:
        assert torch.allclose(z.double(), torch.logsumexp(flat, -1).pow(2).mean(), rtol=1e-6)
    else:
        assert z is None


def test_the_loss_is_compiled_when_the_run_compiles() -> None:
    assert loss_fn(False) is token_losses
    compiled = loss_fn(True)
    assert (
        compiled is not token_losses and getattr(compiled, "_torchdynamo_orig_callable", None) is token_losses
    )
