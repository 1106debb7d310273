"""What the check reads off a run besides its speed: SDPA's backend, the optimizer's fused flag,
host syncs per step, compiled graphs, and the peak memory of the timed steps."""

from __future__ import annotations

import contextlib
import re
import warnings
from collections.abc import Iterator
from typing import Any

import lightning as L
import torch

SDPA_OPS = {  # aten op (profiler name) -> the backend SDPA dispatched to
    "_scaled_dot_product_flash_attention": "flash",
    "_scaled_dot_product_cudnn_attention": "cudnn",
    "_scaled_dot_product_efficient_attention": "efficient",
    "_scaled_dot_product_attention_math": "math",
    "_scaled_dot_product_flash_attention_for_cpu": "flash (cpu)",
}
SYNC_WARNING = re.compile(r"synchroniz", re.IGNORECASE)  # set_sync_debug_mode("warn")'s message


def sdpa_backends(model: torch.nn.Module, idx: torch.Tensor, precision: str) -> list[str]:
    """The SDPA backends one forward (with grad, as training runs it) dispatched to, read from the
    profiler's aten ops: the kernel that ran, whatever the flags allowed."""
    from torch.profiler import ProfilerActivity, profile

    dtype = torch.bfloat16 if precision.startswith("bf16") else None
    with (
        profile(activities=[ProfilerActivity.CPU]) as prof,
        torch.autocast(idx.device.type, dtype=dtype, enabled=dtype is not None),
    ):
        model(idx)
    names = {e.name.removeprefix("aten::") for e in prof.events()}
    return sorted({backend for op, backend in SDPA_OPS.items() if op in names})


def graphs() -> int:
    """Graphs Dynamo has compiled in this process so far (each compile or recompile adds one)."""
    return int(torch._dynamo.utils.counters["stats"]["unique_graphs"])


@contextlib.contextmanager
def compile_backend(backend: str) -> Iterator[None]:
    """torch.compile (which nn.Module.compile and the loss call) with this backend for the block."""
    original = torch.compile

    def with_backend(*args: Any, **kwargs: Any) -> Any:
        return original(*args, **{**kwargs, "backend": backend})

    torch.compile = with_backend  # type: ignore[assignment]
    try:
        yield
    finally:
        torch.compile = original  # type: ignore[assignment]


class OptimizerProbe(L.Callback):
    """The optimizer the run built: its class and whether AdamW took the fused kernel."""

    def __init__(self) -> None:
        self.info: dict[str, Any] = {}

    def on_train_start(self, trainer: L.Trainer, pl_module: Any) -> None:
        opt = trainer.optimizers[0]
        self.info = {
            "optimizer": type(opt).__name__,
            "fused": bool(opt.defaults.get("fused")),
            "foreach": opt.defaults.get("foreach"),
        }


class SyncCounter(L.Callback):
    """Host-device syncs per step after the warm-up: torch's sync debug mode warns at each implicit
    sync (CUDA only), and `count` reads those warnings. Wrap the run in `recording()`."""

    def __init__(self, warmup: int) -> None:
        self.warmup = warmup
        self.on = False

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: Any, batch: Any, i: int) -> None:
        if trainer.global_step == self.warmup and torch.cuda.is_available() and not self.on:
            torch.cuda.set_sync_debug_mode("warn")
            self.on = True

    def on_train_end(self, trainer: L.Trainer, pl_module: Any) -> None:
        if self.on:
            torch.cuda.set_sync_debug_mode("default")


@contextlib.contextmanager
def recording() -> Iterator[list[warnings.WarningMessage]]:
    """Every warning of the block, none filtered (the sync counter's are among them)."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        yield seen


def syncs(seen: list[warnings.WarningMessage]) -> int:
    return sum(bool(SYNC_WARNING.search(str(w.message))) for w in seen)
