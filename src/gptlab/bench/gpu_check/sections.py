"""The check's sections, each a function of the context returning a dict of measurements."""

from __future__ import annotations

import math
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from gptlab.bench.gpu_check.probes import (
    OptimizerProbe,
    SyncCounter,
    graphs,
    recording,
    sdpa_backends,
    syncs,
)
from gptlab.bench.gpu_check.shapes import PARITY_RTOL, RUN, Shapes
from gptlab.config import TrainConfig
from gptlab.model import GPT, GPTConfig


@dataclass
class Context:
    shapes: Shapes
    workdir: Path


@dataclass
class Setup:
    cfg: TrainConfig
    model_cfg: GPTConfig
    device: torch.device
    accelerator: str
    precision: str


def setup(ctx: Context, model: tuple[str, ...], *extra: str) -> Setup:
    """Compose the run as train.py would (plus the check's own overrides), prepare its data."""
    from gptlab.bench.options import compose
    from gptlab.data.datamodule import TokenDataModule
    from gptlab.training.app import model_config
    from gptlab.training.trainer import resolve_devices, resolve_precision

    cache = f"data.cache_dir={ctx.workdir / 'cache'}"
    cfg = compose([*ctx.shapes.common, *model, *RUN, cache, *extra])
    accelerator, _ = resolve_devices(cfg)
    dm = TokenDataModule(cfg.data, block_size=cfg.model.block_size, seed=cfg.seed)
    dm.prepare()
    device = (
        torch.device("cuda", torch.cuda.current_device()) if accelerator == "gpu" else torch.device("cpu")
    )
    return Setup(
        cfg, model_config(cfg, dm.vocab_size), device, accelerator, resolve_precision(cfg, accelerator)
    )


def speed(s: Setup, timing: Any, steps: int) -> dict[str, Any]:
    """tokens/s over the timed window, and MFU where the GPU's peak is known (None on a CPU)."""
    from gptlab.training.callbacks.throughput import peak_flops, tokens_per_step

    tokens = tokens_per_step(s.cfg.data.batch_size, s.model_cfg.block_size) * steps
    tps = tokens / timing.window
    with torch.device("meta"):
        fpt = GPT(s.model_cfg).flops_per_token(s.model_cfg.block_size)
    peak = peak_flops(s.device, s.precision)
    return {
        "tokens_per_sec": tps,
        "mfu": fpt * tps / peak if peak else None,
        "step_ms": 1000 * timing.window / steps,
        "batch": s.cfg.data.batch_size,
        "block_size": s.model_cfg.block_size,
    }


def env(ctx: Context) -> dict[str, Any]:
    import importlib.metadata as md

    from gptlab.training.gpu_defaults import resolve_compile

    cuda = torch.cuda.is_available()
    names = ("torch", "lightning", "hydra-core", "omegaconf", "datasets", "pyarrow", "fsspec", "numpy")
    return {
        "device": torch.cuda.get_device_name() if cuda else "cpu",
        "capability": ".".join(map(str, torch.cuda.get_device_capability())) if cuda else None,
        "versions": {n: md.version(n) for n in names},
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "compile_default": resolve_compile(None, "gpu" if cuda else "cpu"),
    }


def sdpa(ctx: Context) -> dict[str, Any]:
    s = setup(ctx, ctx.shapes.gpt2)
    model = GPT(s.model_cfg).to(s.device)
    idx = torch.randint(0, s.model_cfg.vocab_size, (2, s.model_cfg.block_size), device=s.device)
    return {"backends": sdpa_backends(model, idx, s.precision)}


def bare(ctx: Context, compiled: bool) -> dict[str, Any]:
    from gptlab.bench.bare_loop import bare_run

    s = setup(ctx, ctx.shapes.gpt2, f"compile={str(compiled).lower()}")
    sh = ctx.shapes
    return speed(s, bare_run(s.cfg, s.model_cfg, s.device, s.precision, sh.warmup, sh.steps), sh.steps)


def lightning(
    ctx: Context, model: tuple[str, ...], *extra: str, telemetry: int | None = None
) -> dict[str, Any]:
    """The Lightning path with the default callbacks: speed, the optimizer, host syncs per step."""
    from gptlab.bench.lightning_loop import lightning_run
    from gptlab.bench.timing import peak_memory

    s = setup(ctx, model, *extra)
    sh = ctx.shapes
    probe, counter = OptimizerProbe(), SyncCounter(sh.warmup)
    run_dir = Path(tempfile.mkdtemp(prefix="run-", dir=ctx.workdir))
    with recording() as seen:
        t = lightning_run(
            s.cfg,
            s.model_cfg,
            s.device,
            s.accelerator,
            telemetry,
            sh.warmup,
            sh.steps,
            run_dir,
            [probe, counter],
        )
    n = syncs(seen)
    return {
        **speed(s, t, sh.steps),
        **probe.info,
        "syncs_per_step": n / sh.steps if counter.on else None,
        "peak_gib": peak_memory(s.device) / 2**30,
    }


def strategy(ctx: Context, name: str) -> dict[str, Any]:
    """One Lightning run under DDP or FSDP2 on one device, against the plain strategy's eager run."""
    import torch.distributed as dist

    try:
        return lightning(ctx, ctx.shapes.gpt2, f"trainer.strategy={name}", "compile=false")
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def parity(ctx: Context) -> dict[str, Any]:
    """bf16-mixed + compile against fp32 eager (TF32 off), the same batches, losses step by step."""
    from gptlab.bench.bare_loop import bare_run

    sh = ctx.shapes
    out: dict[str, list[float]] = {}
    for name, precision, compiled in (
        ("fp32_eager", "32-true", False),
        ("bf16_compiled", "bf16-mixed", True),
    ):
        s = setup(ctx, ctx.shapes.gpt2, f"compile={str(compiled).lower()}", f"trainer.precision={precision}")
        losses: list[torch.Tensor] = []
        before = torch.get_float32_matmul_precision()
        torch.set_float32_matmul_precision("highest" if precision == "32-true" else before)
        try:
            bare_run(s.cfg, s.model_cfg, s.device, s.precision, 1, sh.parity_steps - 1, losses)
        finally:
            torch.set_float32_matmul_precision(before)
        out[name] = [float(x) for x in torch.stack(losses).cpu()]
    rel = [abs(a - b) / abs(b) for a, b in zip(out["bf16_compiled"], out["fp32_eager"], strict=True)]
    worst = max(rel) if rel else math.nan
    return {
        **out,
        "max_rel_diff": worst,
        "rtol": PARITY_RTOL,
        "passed": bool(worst <= PARITY_RTOL),
    }


def memory(ctx: Context) -> dict[str, Any]:
    """The timed steps' peak memory with telemetry off (plain steps) and on every step (log steps),
    beside the planner's peak for the same overrides on this GPU (an H100 SXM's on a CPU)."""
    from gptlab.bench.options import compose
    from gptlab.hardware import GPUS, chip
    from gptlab.planning.options import setup_from
    from gptlab.planning.plan import plan

    plain = lightning(ctx, ctx.shapes.gpt2, "compile=false")["peak_gib"]
    log_step = lightning(ctx, ctx.shapes.gpt2, "compile=false", telemetry=1)["peak_gib"]
    row = chip(torch.cuda.get_device_name()) if torch.cuda.is_available() else None
    gpu = GPUS[row or "H100 SXM"]
    cfg = compose([*ctx.shapes.common, *ctx.shapes.gpt2, *RUN, "compile=false"])
    predicted = plan(setup_from(cfg), gpu).memory.peak / 2**30
    return {
        "plain_step_gib": plain,
        "log_step_gib": log_step,
        "planned_gib": predicted,
        "planned_for": gpu.name,
        "measured_on_gpu": row is not None,
    }


SECTIONS = {
    "env": env,
    "sdpa": sdpa,
    "gpt2_bare_eager": lambda c: bare(c, False),
    "gpt2_bare_compiled": lambda c: bare(c, True),
    "gpt2_lightning_eager": lambda c: lightning(c, c.shapes.gpt2, "compile=false"),
    "gpt2_lightning_compiled": lambda c: lightning(c, c.shapes.gpt2, "compile=true"),
    "llama_350m_compiled": lambda c: lightning(c, c.shapes.llama, "compile=true"),
    "parity": parity,
    "memory": memory,
    "ddp": lambda c: strategy(c, "ddp"),
    "fsdp": lambda c: strategy(c, "fsdp"),
}


def with_graphs(fn: Any, ctx: Context) -> dict[str, Any]:
    """Run a section, adding the graphs Dynamo compiled during it."""
    before = graphs()
    result = fn(ctx)
    return {**result, "graphs_compiled": graphs() - before}
