"""What a run on a GPU turns on unless told otherwise: compiled blocks, and TF32 for fp32 matmuls.

Both are speed, not semantics: `compile` left at null (conf/train.yaml) compiles the blocks, the final
norm and the loss when the run's accelerator resolves to a GPU (`trainer=gpu`, or `auto` on a CUDA
machine) and stays eager on a CPU, where inductor's C++ build costs minutes and gains little at our
shapes; `compile=true|false` always wins. On a GPU, fp32 matmuls run on the tensor cores as TF32
(10-bit mantissa inputs, fp32 accumulation: `torch.set_float32_matmul_precision("high")`), about
7× an H100's plain fp32 rate; bf16-mixed runs are unchanged by it. CPU runs never touch the setting.
"""

from __future__ import annotations

import logging

import torch

log = logging.getLogger(__name__)


def resolve_compile(compile: bool | None, accelerator: str) -> bool:
    """The run's `compile`: the explicit value, or on for a GPU accelerator ("gpu"/"cuda") when null."""
    if compile is not None:
        return bool(compile)
    return accelerator in ("gpu", "cuda")


def enable_tf32(accelerator: str) -> bool:
    """On a GPU: fp32 matmuls (and cuDNN convolutions) as TF32. Returns whether it was set.

    `set_float32_matmul_precision("high")` exists and means the same on torch 2.11 and 2.13 (the
    newer per-backend `fp32_precision` attributes are not needed). The throughput callback's MFU
    reads the setting back (its tf32 peak then), so the logged MFU follows it.
    """
    if accelerator not in ("gpu", "cuda"):
        return False
    torch.set_float32_matmul_precision("high")
    torch.backends.cudnn.allow_tf32 = True
    log.info("GPU: fp32 matmuls run as TF32 (torch.set_float32_matmul_precision('high'))")
    return True
