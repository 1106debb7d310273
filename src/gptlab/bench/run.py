"""The whole benchmark: every variant once per round, the order rotated each round because the
machine is shared and noisy, then the data-loading and tokenizing figures.

Both training paths train the same GPT (same seed) on the same batches of the same `TokenDataModule`
loader. After `warmup` steps, `steps` steps are timed; `steps` should be a multiple of the log
interval so that every variant pays its log steps in proportion.
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
import statistics
import tempfile
from pathlib import Path
from typing import Any

import lightning as L
import torch

from gptlab.bench.bare_loop import bare_run
from gptlab.bench.data_speed import loader_throughput, tokenize_times
from gptlab.bench.lightning_loop import lightning_run, quiet
from gptlab.bench.options import BARE, PRECISIONS, TELEMETRY_EVERY
from gptlab.bench.result import BenchResult, Run
from gptlab.bench.timing import Timing, matmul_flops, peak_memory, reset_peak_memory
from gptlab.config import BenchOptions, TrainConfig
from gptlab.data.datamodule import TokenDataModule
from gptlab.model import GPT, GPTConfig

log = logging.getLogger(__name__)


def _check(cfg: TrainConfig) -> None:
    t = cfg.trainer
    if t.devices not in (1, "auto") or t.num_nodes != 1 or t.strategy not in ("auto",):
        raise ValueError(
            f"the benchmark runs on one device: trainer.devices={t.devices!r}, "
            f"trainer.num_nodes={t.num_nodes!r}, trainer.strategy={t.strategy!r}; "
            "accepted: trainer.devices=1 trainer.num_nodes=1 trainer.strategy=auto"
        )
    if t.accumulate_grad_batches != 1:
        raise ValueError(
            f"trainer.accumulate_grad_batches={t.accumulate_grad_batches!r}: the benchmark times "
            "single-micro-batch steps; accepted: 1"
        )


def run_bench(cfg: TrainConfig, opts: BenchOptions, workdir: Path | None = None) -> BenchResult:
    """Measure everything the table shows; `workdir` holds the run dirs and the cold token cache."""
    opts.check()
    _check(cfg)
    threads = torch.get_num_threads()
    if opts.threads:
        torch.set_num_threads(opts.threads)
    try:
        return _run_bench(cfg, opts, workdir)
    finally:
        torch.set_num_threads(threads)


def _describe(
    cfg: TrainConfig,
    model_cfg: GPTConfig,
    num_params: int,
    device: torch.device,
    precision: str,
    opts: BenchOptions,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The model and setup rows of the result: what the table's header states."""
    from gptlab.training.callbacks.throughput import tokens_per_step

    model = {
        "n_layer": model_cfg.n_layer,
        "n_embd": model_cfg.n_embd,
        "n_head": model_cfg.n_head,
        "block_size": model_cfg.block_size,
        "vocab_size": model_cfg.vocab_size,
        "norm_placement": model_cfg.norm_placement,
        "norm": model_cfg.norm,
        "ffn": model_cfg.ffn,
        "tie_embeddings": model_cfg.tie_embeddings,
        "pos_emb": model_cfg.pos_emb,
        "num_params": num_params,
    }
    setup = {
        "device": str(device) if device.type == "cpu" else torch.cuda.get_device_name(device),
        "threads": torch.get_num_threads(),
        "precision": precision,
        "compile": cfg.compile,
        "batch_size": cfg.data.batch_size,
        "tokens_per_step": tokens_per_step(cfg.data.batch_size, model_cfg.block_size),
        "warmup": opts.warmup,
        "steps": opts.steps,
        "repeats": opts.repeats,
        "variants": list(opts.variants),
        "log_every_n_steps": cfg.trainer.log_every_n_steps,
        "progress_bar": cfg.trainer.enable_progress_bar,
        "progress_refresh_rate": cfg.callbacks.progress_refresh_rate,
        "loggers": [n for n in ("wandb", "csv") if getattr(cfg.logger, n)],
        "num_workers": cfg.data.num_workers,
        "torch": torch.__version__,
        "lightning": L.__version__,
    }
    return model, setup


def _timed(
    variant: str,
    k: int,
    cfg: TrainConfig,
    model_cfg: GPTConfig,
    device: torch.device,
    accelerator: str,
    precision: str,
    opts: BenchOptions,
    workdir: Path,
) -> Timing:
    """One variant's run in round k (a Lightning run gets its own run dir under workdir)."""
    if variant == BARE:
        return bare_run(cfg, model_cfg, device, precision, opts.warmup, opts.steps)
    run_dir = Path(tempfile.mkdtemp(prefix=f"r{k}-", dir=workdir))
    every = TELEMETRY_EVERY.get(variant)
    return lightning_run(cfg, model_cfg, device, accelerator, every, opts.warmup, opts.steps, run_dir)


def _run_bench(cfg: TrainConfig, opts: BenchOptions, workdir: Path | None) -> BenchResult:
    from gptlab.training.app import model_config
    from gptlab.training.callbacks.throughput import peak_flops
    from gptlab.training.gpu_defaults import enable_tf32, resolve_compile
    from gptlab.training.trainer import resolve_devices, resolve_precision

    cfg = dataclasses.replace(cfg, trainer=dataclasses.replace(cfg.trainer, devices=1))
    accelerator, _ = resolve_devices(cfg)
    cfg = dataclasses.replace(cfg, compile=resolve_compile(cfg.compile, accelerator))
    enable_tf32(accelerator)
    precision = resolve_precision(cfg, accelerator)
    if precision not in PRECISIONS:
        raise ValueError(
            f"trainer.precision={precision!r} is not benchmarked; accepted: {', '.join(PRECISIONS)}"
        )
    device = (
        torch.device("cuda", torch.cuda.current_device()) if accelerator == "gpu" else torch.device("cpu")
    )

    own_tmp = workdir is None
    workdir = Path(tempfile.mkdtemp(prefix="gptlab-bench-")) if workdir is None else Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    dm = TokenDataModule(cfg.data, block_size=cfg.model.block_size, seed=cfg.seed)
    with quiet():
        dm.prepare()
    model_cfg = model_config(cfg, dm.vocab_size, dm.tokenizer)
    T = model_cfg.block_size
    with torch.device("meta"):
        meta_model = GPT(model_cfg)
    n_flops = meta_model.num_params(exclude_embedding=True)
    fpt = meta_model.flops_per_token(T)

    peak = peak_flops(device, precision)
    peak_source = f"dense {precision} table (callbacks/throughput.py)"
    samples: list[float] = []
    if peak is None:
        dtype = torch.float32 if device.type == "cpu" else torch.bfloat16
        samples = matmul_flops(device, opts.matmul_size, opts.matmul_repeats, dtype)
        n = opts.matmul_size
        peak_source = f"measured: {n}×{n} @ {n}×{n} {str(dtype).removeprefix('torch.')} matmul"

    model, setup = _describe(cfg, model_cfg, meta_model.num_params(), device, precision, opts)
    result = BenchResult(
        model=model,
        setup=setup,
        flops_per_token=fpt,
        n_params_flops=n_flops,
        peak_flops=peak,
        peak_source=peak_source,
        peak_samples=samples,
    )
    try:
        for k in range(opts.repeats):
            order = list(opts.variants[k % len(opts.variants) :] + opts.variants[: k % len(opts.variants)])
            for variant in order:
                reset_peak_memory(device)
                log.info("round %d/%d: %s", k + 1, opts.repeats, variant)
                with quiet():
                    t = _timed(variant, k, cfg, model_cfg, device, accelerator, precision, opts, workdir)
                result.runs.append(
                    Run(
                        variant,
                        k,
                        t.step_times,
                        t.window,
                        peak_memory(device),
                        t.cpu_window,
                        t.faults,
                        t.hook_seconds,
                    )
                )
            if peak is None and k + 1 < opts.repeats:  # re-sample the peak between rounds, too
                dtype = torch.float32 if device.type == "cpu" else torch.bfloat16
                result.peak_samples += matmul_flops(device, opts.matmul_size, opts.matmul_repeats, dtype)
        if result.peak_samples:
            result.peak_flops = statistics.median(result.peak_samples)
        result.loader_batches_per_sec = loader_throughput(cfg, T, opts.loader_batches)
        if opts.tokenize:
            result.tokenize = tokenize_times(cfg, workdir)
    finally:
        if own_tmp:
            shutil.rmtree(workdir, ignore_errors=True)
    return result
