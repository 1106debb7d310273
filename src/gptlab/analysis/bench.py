"""Training-speed benchmark: the Lightning path users run against a bare PyTorch loop, side by side.

Both variants train the same GPT (same seed), with the same AdamW (`gptlab.training.optim`), the same
schedule and clipping, on the same batches of the same `TokenDataModule` loader. The Lightning runs use
the Trainer and default callbacks of `gptlab.training.app` (progress bar as configured, our throughput,
summary, checkpoint and non-finite callbacks) with layer telemetry off, every 10 and every step. Runs
are interleaved (the order rotates each round) because the machine is shared and noisy; every figure
is a median over rounds with its min–max spread.

A step's time is the wall time between the ends of two consecutive optimizer steps: data fetch,
forward, backward, clipping, optimizer, callbacks and logging. After `warmup` steps, `steps` steps
are timed; `steps` should be a multiple of the log interval so that every variant pays its log steps
in proportion. On a GPU the device is synchronised only at the two ends of the timed window.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import logging
import os
import re
import resource
import statistics
import tempfile
import time
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import lightning as L
import torch
import torch.nn.functional as F

from gptlab.config import TrainConfig
from gptlab.data.datamodule import TokenDataModule
from gptlab.model import GPT, GPTConfig

log = logging.getLogger(__name__)

BARE = "bare"
LIGHTNING = "lightning"
TELEMETRY_EVERY = {"lightning+telemetry/10": 10, "lightning+telemetry/1": 1}
VARIANTS = (BARE, LIGHTNING, *TELEMETRY_EVERY)
PRECISIONS = ("32-true", "bf16-mixed")
TARGET_RATIO = 0.97
TARGET_TELEMETRY = {10: 0.01, 1: 0.05}
FLOPS_NOTE = (
    "N = GPT.num_params(exclude_embedding=True): lookup tables (tok_emb when untied, pos_emb) "
    "dropped, the tied head matrix kept, because the head matmul is real compute; 12·L·T·d counts "
    "full (non-causal) attention, as PaLM and nanoGPT do"
)


@dataclass
class BenchOptions:
    """What to run: `bench.<field>=<value>` on the command line."""

    steps: int = 10  # timed optimizer steps per run (a multiple of the log interval)
    warmup: int = 3  # untimed steps before them (allocator, caches, torch.compile)
    repeats: int = 3  # rounds; each round runs every variant once, in rotated order
    variants: tuple[str, ...] = VARIANTS
    loader_batches: int = 200  # batches read from the train DataLoader alone
    tokenize: bool = True  # time tokenizing the configured corpus, cold then cached
    matmul_size: int = 2048  # n of the n×n @ n×n fp32 matmul that measures a CPU's peak
    matmul_repeats: int = 5
    threads: int = 0  # torch.set_num_threads for the whole benchmark; 0: torch's default

    def check(self) -> None:
        """One clear error per bad option."""
        if not isinstance(self.threads, int) or self.threads < 0:
            raise ValueError(f"bench.threads={self.threads!r} must be an integer >= 0 (0: torch's default)")
        for name in ("steps", "warmup", "repeats", "loader_batches", "matmul_size", "matmul_repeats"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"bench.{name}={value!r} must be an integer >= 1")
        unknown = [v for v in self.variants if v not in VARIANTS]
        if unknown or not self.variants:
            raise ValueError(
                f"bench.variants={','.join(self.variants)!r} is not accepted; choose from "
                f"{', '.join(VARIANTS)} (comma-separated)"
            )


@dataclass
class Run:
    """One variant's timed window in one round."""

    variant: str
    round: int
    step_times: list[float]  # per step; on a GPU only their sum is exact
    window: float  # seconds for all timed steps
    peak_mem: int  # bytes
    cpu_window: float = 0.0  # CPU seconds of this process over the window (blind to other processes)
    faults: float = 0.0  # minor page faults per timed step (the allocator mapping fresh memory)
    hook_seconds: float = 0.0  # time inside LayerTelemetry's hooks over the window


@dataclass
class BenchResult:
    """Everything the table shows, as plain data (also written as JSON by scripts/bench.py)."""

    model: dict[str, Any]
    setup: dict[str, Any]
    flops_per_token: int
    n_params_flops: int
    peak_flops: float | None
    peak_source: str
    peak_samples: list[float] = field(default_factory=list)
    runs: list[Run] = field(default_factory=list)
    loader_batches_per_sec: float | None = None
    tokenize: dict[str, float] = field(default_factory=dict)

    def tokens_per_step(self) -> int:
        return int(self.setup["tokens_per_step"])

    def of(self, variant: str) -> list[Run]:
        return [r for r in self.runs if r.variant == variant]

    def tokens_per_sec(self, run: Run, clock: str = "wall") -> float:
        """Tokens per wall-clock second, or per CPU second of this process (clock="cpu")."""
        seconds = run.cpu_window if clock == "cpu" else run.window
        return self.tokens_per_step() * len(run.step_times) / seconds

    def paired(self, num: str, den: str, clock: str = "wall") -> list[float]:
        """Per-round tokens/s ratios num/den (pairs from the same round share the machine's mood)."""
        rounds = sorted({r.round for r in self.runs})
        out = []
        for k in rounds:
            a = [r for r in self.of(num) if r.round == k]
            b = [r for r in self.of(den) if r.round == k]
            if a and b:
                out.append(self.tokens_per_sec(a[0], clock) / self.tokens_per_sec(b[0], clock))
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-able summary with the medians the table prints."""
        data = dataclasses.asdict(self)
        data["summary"] = {
            v: {
                "tokens_per_sec": statistics.median(self.tokens_per_sec(r) for r in self.of(v)),
                "tokens_per_cpu_sec": statistics.median(
                    self.tokens_per_sec(r, "cpu") for r in self.of(v) if r.cpu_window > 0
                )
                if any(r.cpu_window > 0 for r in self.of(v))
                else None,
                "step_time_mean_s": statistics.median(r.window / len(r.step_times) for r in self.of(v)),
                "peak_mem_bytes": statistics.median(r.peak_mem for r in self.of(v)),
            }
            for v in self.setup["variants"]
            if self.of(v)
        }
        return data


# ---- measuring primitives ------------------------------------------------------------------------
def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def matmul_flops(device: torch.device, n: int, repeats: int, dtype: torch.dtype) -> list[float]:
    """FLOP/s of n×n @ n×n matmuls (2n³ each), one untimed call first; one sample per call."""
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    a @ b
    _sync(device)
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        a @ b
        _sync(device)
        samples.append(2 * n**3 / (time.perf_counter() - t0))
    return samples


def _reset_peak_memory(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
        return
    with contextlib.suppress(OSError):  # Linux ≥ 4.0: "5" resets VmHWM, the peak RSS
        Path("/proc/self/clear_refs").write_text("5")


def peak_memory(device: torch.device) -> int:
    """Bytes: max allocated on a GPU; the process's peak RSS (VmHWM, or ru_maxrss) on a CPU."""
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    with contextlib.suppress(OSError):
        m = re.search(r"VmHWM:\s+(\d+)\s+kB", Path("/proc/self/status").read_text())
        if m:
            return int(m.group(1)) * 1024
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024  # KiB on Linux


@dataclass
class Timing:
    """What one run measured over its timed window."""

    step_times: list[float]
    window: float
    cpu_window: float
    faults: float
    hook_seconds: float = 0.0


Marks = tuple[float, int, float]


def _counters(hooks: HookClock | None = None) -> Marks:
    """(process CPU seconds, minor page faults, hook time so far): read at the window's two ends."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return time.process_time(), int(usage.ru_minflt), hooks.total if hooks is not None else 0.0


def _timing(stamps: Sequence[float], marks: Sequence[Marks], warmup: int, steps: int) -> Timing:
    times, window = window_times(stamps, warmup, steps)
    (cpu0, f0, h0), (cpu1, f1, h1) = marks[0], marks[-1]
    return Timing(times, window, cpu1 - cpu0, (f1 - f0) / steps, h1 - h0)


class HookClock:
    """Adds up the time spent inside a callback's `on_*` hooks: a direct measure of its cost that a
    noisy machine cannot blur the way it blurs the difference of two runs. CPU time on a CPU (with
    one thread it is this hook's work alone), host wall time on a GPU (the kernels it launches run
    asynchronously and are not included)."""

    def __init__(self, callback: L.Callback, device: torch.device) -> None:
        self.total = 0.0
        clock = time.process_time if device.type == "cpu" else time.perf_counter
        for name in dir(type(callback)):
            if name.startswith("on_") and getattr(type(callback), name) is not getattr(
                L.Callback, name, None
            ):
                setattr(callback, name, self._wrap(getattr(callback, name), clock))

    def _wrap(self, fn: Any, clock: Any) -> Any:
        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = clock()
            try:
                return fn(*args, **kwargs)
            finally:
                self.total += clock() - t0

        return timed


def window_times(stamps: Sequence[float], warmup: int, steps: int) -> tuple[list[float], float]:
    """(per-step times, whole window) from the end-of-step stamps of warmup + steps steps."""
    if len(stamps) < warmup + steps:
        raise RuntimeError(f"only {len(stamps)} steps ran; {warmup + steps} were asked for")
    timed = stamps[warmup - 1 : warmup + steps]
    return [b - a for a, b in zip(timed, timed[1:], strict=False)], timed[-1] - timed[0]


class StepTimer(L.Callback):
    """Stamps the end of every optimizer step (put it last: it then follows our other callbacks)."""

    def __init__(self, device: torch.device, warmup: int, steps: int, hooks: HookClock | None = None) -> None:
        self.device, self.warmup, self.steps, self.hooks = device, warmup, steps, hooks
        self.stamps: list[float] = []
        self.marks: list[Marks] = []

    def on_train_batch_end(
        self, trainer: L.Trainer, pl_module: Any, outputs: Any, batch: Any, i: int
    ) -> None:
        if len(self.stamps) in (self.warmup - 1, self.warmup + self.steps - 1):
            _sync(self.device)  # the window's two ends only: no sync inside it
            self.marks.append(_counters(self.hooks))
        self.stamps.append(time.perf_counter())


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Lightning's banners, warnings and the progress bar go to /dev/null (the bar still renders:
    its cost is measured, minus the terminal's)."""
    names = ("lightning.pytorch", "lightning.fabric", "lightning")
    levels = {n: logging.getLogger(n).level for n in names}
    with (
        open(os.devnull, "w") as null,
        contextlib.redirect_stdout(null),  # TQDMProgressBar writes to stdout
        contextlib.redirect_stderr(null),
        warnings.catch_warnings(),
    ):
        warnings.simplefilter("ignore")
        for n in names:
            logging.getLogger(n).setLevel(logging.ERROR)
        try:
            yield
        finally:
            for n, level in levels.items():
                logging.getLogger(n).setLevel(level)


# ---- the two training paths ----------------------------------------------------------------------
def _autocast(device: torch.device, precision: str) -> contextlib.AbstractContextManager:
    if precision == "bf16-mixed":
        return torch.autocast(device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def bare_run(
    cfg: TrainConfig, model_cfg: GPTConfig, device: torch.device, precision: str, warmup: int, steps: int
) -> Timing:
    """A plain loop: same GPT, AdamW, schedule, clipping and DataLoader as the LightningModule."""
    from gptlab.training.optim import build_adamw, lr_factor
    from gptlab.training.strategies import compile_blocks

    L.seed_everything(cfg.seed, workers=True, verbose=False)
    model = GPT(model_cfg).to(device)
    if cfg.compile:
        compile_blocks(model)
    model.train()
    opt = build_adamw(model, cfg.optim, device.type)
    schedule = torch.optim.lr_scheduler.LambdaLR(opt, lr_factor(cfg.optim, warmup + steps))
    dm = TokenDataModule(cfg.data, block_size=model_cfg.block_size, seed=cfg.seed)
    loader = dm.train_dataloader()
    clip = cfg.optim.grad_clip
    stamps: list[float] = []
    marks: list[Marks] = []
    batches = iter(loader)
    for k in range(warmup + steps):
        try:
            batch = next(batches)
        except StopIteration:  # a small corpus: start the stream again
            batches = iter(loader)
            batch = next(batches)
        batch = batch.to(device, non_blocking=True)
        with _autocast(device, precision):
            logits = model(batch[:, :-1])
            loss = F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), batch[:, 1:].reshape(-1))
        loss.backward()
        del logits, loss  # as Lightning's loop does: the next forward can reuse their memory
        # the Lightning path's work: the global norm every step (its non-finite guard drops a bad
        # update, with a host read on a non-fused optimizer), then the clip when one is set
        params = [p for p in model.parameters() if p.grad is not None]
        total = torch.nn.utils.get_total_norm([p.grad for p in params], foreach=True)
        if clip > 0:
            torch.nn.utils.clip_grads_with_norm_(params, clip, total, foreach=True)
        if not opt.defaults.get("fused") and not bool(torch.isfinite(total)):
            opt.zero_grad(set_to_none=True)
        opt.step()
        opt.zero_grad(set_to_none=True)
        schedule.step()
        if k in (warmup - 1, warmup + steps - 1):
            _sync(device)
            marks.append(_counters())
        stamps.append(time.perf_counter())
    return _timing(stamps, marks, warmup, steps)


def lightning_run(
    cfg: TrainConfig,
    model_cfg: GPTConfig,
    device: torch.device,
    accelerator: str,
    telemetry_every: int | None,
    warmup: int,
    steps: int,
    run_dir: Path,
) -> Timing:
    """Our LightningModule + TokenDataModule + app's Trainer and default callbacks, timed per step."""
    from gptlab.data.spec import tokenizer_spec
    from gptlab.training.app import build_callbacks, build_trainer
    from gptlab.training.callbacks.summary import RunSummary
    from gptlab.training.loggers import build_loggers, finish_wandb
    from gptlab.training.module import GPTLightningModule

    t = cfg.callbacks.telemetry
    telemetry = dataclasses.replace(
        t, enabled=telemetry_every is not None, every_n_steps=telemetry_every, figures=False
    )
    trainer_cfg = dataclasses.replace(
        cfg.trainer,
        max_steps=warmup + steps,
        val_check_interval=warmup + steps,
    )
    cfg = dataclasses.replace(
        cfg,
        trainer=trainer_cfg,
        callbacks=dataclasses.replace(cfg.callbacks, telemetry=telemetry),
    )
    L.seed_everything(cfg.seed, workers=True, verbose=False)
    dm = TokenDataModule(cfg.data, block_size=model_cfg.block_size, seed=cfg.seed)
    dm.prepare()
    module = GPTLightningModule(
        model=dataclasses.asdict(model_cfg),
        optim=dataclasses.asdict(cfg.optim),
        bytes_per_token=dm.bytes_per_token,
        compile=cfg.compile,
        tokenizer=tokenizer_spec(dm.tokenizer),
    )
    loggers = build_loggers(cfg.logger, run_dir, "bench", {"bench": True}, 0)
    from gptlab.training.callbacks.telemetry import LayerTelemetry

    callbacks = build_callbacks(cfg, run_dir, RunSummary(run_dir))
    telemetry_cb = [c for c in callbacks if isinstance(c, LayerTelemetry)]
    hooks = HookClock(telemetry_cb[0], device) if telemetry_cb else None
    timer = StepTimer(device, warmup, steps, hooks)
    callbacks = [*callbacks, timer]
    trainer = build_trainer(cfg, accelerator, 1, run_dir, loggers, callbacks)
    trainer.limit_val_batches = 0  # no validation inside the timed window (Lightning reads it at fit)
    try:
        trainer.fit(module, datamodule=dm)
    finally:
        finish_wandb(loggers)
    return _timing(timer.stamps, timer.marks, warmup, steps)


# ---- the whole benchmark -------------------------------------------------------------------------
def loader_throughput(cfg: TrainConfig, block_size: int, n_batches: int) -> float:
    """Batches/s of the train DataLoader alone (no model), over up to n_batches."""
    loader = TokenDataModule(cfg.data, block_size=block_size, seed=cfg.seed).train_dataloader()
    count, t0 = 0, time.perf_counter()
    while count < n_batches:
        for _ in loader:
            count += 1
            if count >= n_batches:
                break
    return count / (time.perf_counter() - t0)


def tokenize_times(cfg: TrainConfig, workdir: Path) -> dict[str, float]:
    """Seconds to tokenize and pack the configured corpus into a fresh cache dir, then from the cache."""
    import datasets

    from gptlab.data.packing import prepare_tokens

    data = dataclasses.replace(cfg.data, cache_dir=str(workdir / "tokenize_cache"))
    enabled = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()
    try:
        t0 = time.perf_counter()
        packed = prepare_tokens(data)
        cold = time.perf_counter() - t0
        t0 = time.perf_counter()
        prepare_tokens(data)
        cached = time.perf_counter() - t0
    finally:
        if enabled:
            datasets.enable_progress_bars()
    return {
        "cold_s": cold,
        "cached_s": cached,
        "tokens": float(sum(packed.meta["n_tokens"].values())),
        "load_s": float(packed.meta.get("load_seconds", float("nan"))),
        "tokenize_s": float(packed.meta.get("tokenize_seconds", float("nan"))),
    }


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


def _run_bench(cfg: TrainConfig, opts: BenchOptions, workdir: Path | None) -> BenchResult:
    from gptlab.training.app import model_config, resolve_devices, resolve_precision
    from gptlab.training.callbacks.throughput import peak_flops

    cfg = dataclasses.replace(cfg, trainer=dataclasses.replace(cfg.trainer, devices=1))
    accelerator, _ = resolve_devices(cfg)
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
    with _quiet():
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

    result = BenchResult(
        model={
            "n_layer": model_cfg.n_layer,
            "n_embd": model_cfg.n_embd,
            "n_head": model_cfg.n_head,
            "block_size": T,
            "vocab_size": model_cfg.vocab_size,
            "norm_placement": model_cfg.norm_placement,
            "norm": model_cfg.norm,
            "ffn": model_cfg.ffn,
            "tie_embeddings": model_cfg.tie_embeddings,
            "pos_emb": model_cfg.pos_emb,
            "num_params": meta_model.num_params(),
        },
        setup={
            "device": str(device) if device.type == "cpu" else torch.cuda.get_device_name(device),
            "threads": torch.get_num_threads(),
            "precision": precision,
            "compile": cfg.compile,
            "batch_size": cfg.data.batch_size,
            "tokens_per_step": cfg.data.batch_size * T,
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
        },
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
                _reset_peak_memory(device)
                log.info("round %d/%d: %s", k + 1, opts.repeats, variant)
                with _quiet():
                    if variant == BARE:
                        t = bare_run(cfg, model_cfg, device, precision, opts.warmup, opts.steps)
                    else:
                        run_dir = Path(tempfile.mkdtemp(prefix=f"r{k}-", dir=workdir))
                        t = lightning_run(
                            cfg,
                            model_cfg,
                            device,
                            accelerator,
                            TELEMETRY_EVERY.get(variant),
                            opts.warmup,
                            opts.steps,
                            run_dir,
                        )
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
            import shutil

            shutil.rmtree(workdir, ignore_errors=True)
    return result


# ---- the table -----------------------------------------------------------------------------------
def _si(x: float, unit: str = "") -> str:
    for div, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= div:
            return f"{x / div:.3g} {prefix}{unit}"
    return f"{x:.3g} {unit}".rstrip()


def _spread(values: Sequence[float], fmt: str) -> str:
    return f"{fmt.format(min(values))}–{fmt.format(max(values))}"


def _verdict(ok: bool) -> str:
    return "meets target" if ok else "MISSES target"


def format_table(r: BenchResult) -> str:
    """The human-readable report: setup, FLOP accounting, the per-variant table, the ratios."""
    m, s = r.model, r.setup
    lines = [
        f"model: L={m['n_layer']} d={m['n_embd']} H={m['n_head']} T={m['block_size']} "
        f"V={m['vocab_size']} {m['norm_placement']}/{m['norm']}/{m['ffn']} "
        f"{'tied' if m['tie_embeddings'] else 'untied'} {m['pos_emb']}, {m['num_params']:,} parameters",
        f"setup: {s['device']} ({s['threads']} threads), precision {s['precision']}, compile "
        f"{str(s['compile']).lower()}, batch {s['batch_size']} × {m['block_size']} = "
        f"{s['tokens_per_step']} tokens/step, torch {s['torch']}, lightning {s['lightning']}",
        f"timing: {s['warmup']} warm-up + {s['steps']} timed steps per run, {s['repeats']} rounds, "
        "variants interleaved (order rotated each round); medians over rounds [min–max]",
        f"FLOPs/token = 6·N + 12·L·T·d = 6·{r.n_params_flops:,} + 12·{m['n_layer']}·"
        f"{m['block_size']}·{m['n_embd']} = {r.flops_per_token:,}",
        f"  ({FLOPS_NOTE})",
    ]
    if r.peak_flops:
        extra = ""
        if r.peak_samples:
            extra = f", median of {len(r.peak_samples)} [{_spread(r.peak_samples, '{:.3g}')}]"
        lines.append(f"peak: {_si(r.peak_flops, 'FLOP/s')} ({r.peak_source}{extra})")
        if s["precision"] != "bf16-mixed" and "table" in r.peak_source:
            lines.append("  (note: the table's peak is bf16; this run is not, so its MFU is understated)")
    else:
        lines.append("peak: unknown (no MFU)")
    lines.append(
        f"lightning path: Trainer + callbacks of gptlab.training.app (loggers: "
        f"{'+'.join(s['loggers']) or 'none'}; progress bar "
        f"{'on, refresh every ' + str(s['progress_refresh_rate']) if s['progress_bar'] else 'off'}; "
        f"ModelCheckpoint kept, it writes only after the timed window; log every "
        f"{s['log_every_n_steps']} steps; no validation)"
    )
    lines.append("")
    gpu = not s["device"].startswith("cpu")
    header = (
        f"{'variant':<24} {'tokens/s':>10} {'[min–max]':>17} {'step ms':>9} {'p50 ms':>8} "
        f"{'MFU':>7} {'peak mem':>10} {'faults/step':>12}" + ("" if gpu else f" {'CPU ms/step':>12}")
    )
    mem_label = "max allocated" if gpu else "peak RSS (process)"
    lines += [header, "-" * len(header)]
    for v in s["variants"]:
        runs = r.of(v)
        if not runs:
            continue
        tps = [r.tokens_per_sec(x) for x in runs]
        step = statistics.median(x.window / len(x.step_times) for x in runs) * 1e3
        p50 = "–" if gpu else f"{statistics.median(t for x in runs for t in x.step_times) * 1e3:.1f}"
        mfu = f"{statistics.median(tps) * r.flops_per_token / r.peak_flops:.1%}" if r.peak_flops else "–"
        mem = statistics.median(x.peak_mem for x in runs) / 2**20
        lines.append(
            f"{v:<24} {statistics.median(tps):>10.0f} {_spread(tps, '{:.0f}'):>17} {step:>9.1f} "
            f"{p50:>8} {mfu:>7} {mem:>7.0f} MiB {statistics.median(x.faults for x in runs):>12.0f}"
            + (
                ""
                if gpu
                else f" {statistics.median(x.cpu_window / len(x.step_times) for x in runs) * 1e3:>12.1f}"
            )
        )
    lines.append(
        f"(peak mem: {mem_label}; step ms: mean over the timed window; p50: median step; "
        "faults/step: minor page faults of the process, i.e. memory the allocator mapped afresh"
        + ("" if gpu else "; CPU ms/step: this process's CPU time, blind to other processes")
        + ")"
    )
    lines.append("")
    # On a CPU the verdicts use CPU time: on a shared machine wall time mostly measures the others.
    clocks = ("wall",) if gpu else ("cpu", "wall")
    judge = clocks[0]
    if not gpu:
        lines.append(
            "ratios by CPU time (the verdict; with bench.threads=1 it ignores contention), then wall time:"
        )
    for num in (LIGHTNING, "lightning+telemetry/10"):
        for clock in clocks:
            ratios = r.paired(num, BARE, clock)
            if not ratios:
                continue
            med = statistics.median(ratios)
            verdict = (
                f" (target >= {TARGET_RATIO}: {_verdict(med >= TARGET_RATIO)})" if clock == judge else ""
            )
            lines.append(
                f"{num} / bare, tokens/s ({clock}): {med:.3f} [per round {_spread(ratios, '{:.3f}')}]"
                + verdict
            )
    for variant, every in TELEMETRY_EVERY.items():
        for clock in clocks:
            ratios = r.paired(LIGHTNING, variant, clock)  # without / with = step time with / without
            if not ratios:
                continue
            over = [x - 1 for x in ratios]
            med = statistics.median(over)
            target = TARGET_TELEMETRY[every]
            verdict = f" (target <= {target:.0%}: {_verdict(med <= target)})" if clock == judge else ""
            lines.append(
                f"telemetry every {every:>2} step(s) ({clock}): {med:+.1%} step time vs none "
                f"[per round {_spread(over, '{:+.1%}')}]" + verdict
            )
    base = r.of(LIGHTNING)
    for variant, every in TELEMETRY_EVERY.items():
        runs = r.of(variant)
        if not runs or not base:
            continue
        clock = "wall" if gpu else "cpu"
        own = statistics.median(x.hook_seconds / len(x.step_times) for x in runs)
        step = statistics.median((x.window if gpu else x.cpu_window) / len(x.step_times) for x in base)
        target = TARGET_TELEMETRY[every]
        lines.append(
            f"telemetry every {every:>2} step(s), its hooks' own {'host' if gpu else 'CPU'} time: "
            f"{own * 1e3:.2f} ms/step = {own / step:.2%} of the telemetry-off step ({clock})"
            + (f" (target <= {target:.0%}: {_verdict(own / step <= target)})" if not gpu else "")
        )
    if r.loader_batches_per_sec is not None:
        consumed = [len(x.step_times) / x.window for x in (r.of(BARE) or r.runs)]
        need = statistics.median(consumed)
        lines.append(
            f"data: train DataLoader alone {r.loader_batches_per_sec:,.1f} batches/s "
            f"(num_workers={s['num_workers']}); the model consumes {need:,.2f} batches/s "
            f"({'bare' if r.of(BARE) else r.runs[0].variant}) → loader headroom "
            f"{r.loader_batches_per_sec / need:,.0f}×"
        )
    if r.tokenize:
        t = r.tokenize
        lines.append(
            f"tokenize configured corpus ({t['tokens']:,.0f} tokens): cold {t['cold_s']:.2f} s "
            f"(fresh cache dir; load {t['load_s']:.2f} s + tokenize/pack {t['tokenize_s']:.2f} s), "
            f"cached {t['cached_s']:.3f} s"
        )
    return "\n".join(lines)


def parse_args(argv: Sequence[str]) -> tuple[BenchOptions, list[str]]:
    """`bench.<field>=<value>` go to BenchOptions; everything else is a Hydra override."""
    opts = BenchOptions()
    names = {f.name: f for f in dataclasses.fields(BenchOptions)}
    overrides = []
    for arg in argv:
        if not arg.startswith("bench."):
            overrides.append(arg)
            continue
        key, sep, value = arg[len("bench.") :].partition("=")
        if not sep or key not in names:
            raise ValueError(
                f"argument {arg!r} is not accepted; bench options are bench.<field>=<value> with "
                f"field one of {', '.join(names)}"
            )
        if key == "variants":
            setattr(opts, key, tuple(v.strip() for v in value.split(",") if v.strip()))
        elif key == "tokenize":
            if value.lower() not in ("true", "false"):
                raise ValueError(f"bench.tokenize={value!r} is not accepted; use true or false")
            opts.tokenize = value.lower() == "true"
        else:
            try:
                setattr(opts, key, int(value))
            except ValueError:
                raise ValueError(f"bench.{key}={value!r} must be an integer") from None
    opts.check()
    return opts, overrides


def compose(overrides: Sequence[str], conf_dir: Path | None = None) -> TrainConfig:
    """conf/train.yaml composed with the overrides and validated, as train.py does (logger=csv
    unless a logger override is given: wandb's service process would compete for the CPU)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from omegaconf import OmegaConf

    from gptlab.config import register_configs

    register_configs()
    conf_dir = conf_dir or Path(__file__).resolve().parents[3] / "conf"
    overrides = list(overrides)
    if not any(o.lstrip("+~").startswith("logger") for o in overrides):
        overrides.insert(0, "logger=csv")
    with initialize_config_dir(config_dir=str(conf_dir), version_base="1.3"):
        raw = hydra_compose(config_name="train", overrides=overrides)
    return OmegaConf.to_object(raw)  # type: ignore[return-value]


# ---- torch.compile parity ------------------------------------------------------------------------
PLACEMENTS = ("pre", "post", "sandwich", "deepnorm")
COMPILE_FFNS = ("swiglu", "gelu")


def compile_parity(placement: str, ffn: str, seed: int = 0, **model: Any) -> dict[str, float]:
    """One forward+backward of a tiny GPT with its blocks compiled (`compile_blocks`, what
    `compile=true` runs) against the same GPT eager: seconds, and the largest loss/grad differences."""
    from gptlab.training.strategies import compile_blocks

    shape = {"n_layer": 2, "n_embd": 32, "n_head": 2, "block_size": 16, "vocab_size": 64, **model}
    extra = {"depth_scaled_init": "none"} if placement == "deepnorm" else {}  # as its preset: β instead
    cfg = GPTConfig.from_dict({**shape, **extra, "norm_placement": placement, "ffn": ffn})
    torch.manual_seed(seed)
    eager = GPT(cfg)
    compiled = GPT(cfg)
    compiled.load_state_dict(eager.state_dict())
    compile_blocks(compiled)
    idx = torch.randint(
        0, cfg.vocab_size, (2, cfg.block_size + 1), generator=torch.Generator().manual_seed(seed)
    )

    def step(model: GPT) -> torch.Tensor:
        logits = model(idx[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), idx[:, 1:].reshape(-1))
        loss.backward()
        return loss.detach()

    ref = step(eager)
    t0 = time.perf_counter()
    got = step(compiled)
    seconds = time.perf_counter() - t0
    grads = dict(eager.named_parameters())
    grad_diff = max(
        float((p.grad - grads[n].grad).abs().max() / (grads[n].grad.abs().max() + 1e-12))
        for n, p in compiled.named_parameters()
    )
    compiled_blocks = sum(getattr(b, "_compiled_call_impl", None) is not None for b in compiled.blocks)
    return {
        "seconds": seconds,
        "loss_diff": float((got - ref).abs()),
        "max_rel_grad_diff": grad_diff,
        "compiled_blocks": float(compiled_blocks),
        "n_layer": float(cfg.n_layer),
    }
