"""The sizing table of docs/performance.md: `python scripts/plan.py --table` (minutes of fake steps).

For each model at 2048 tokens of context, on one H200 and on 8 H100 SXM with FSDP2, without and
with full activation checkpointing: the largest micro-batch that fits (each candidate measured on
fake tensors), its peak memory per device, and its step time at the MFU table's cited figure.
"""

from __future__ import annotations

import platform
import time
from collections.abc import Sequence
from dataclasses import dataclass

MODELS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("gpt2-124M", ("model=gpt2", "model.block_size=2048")),
    ("llama-125M", ("model=llama_125m", "model.block_size=2048", "model.vocab_size=32000")),
    ("llama-350M", ("model=llama_350m", "model.block_size=2048", "model.vocab_size=32000")),
    ("llama-1B", ("model=llama_1b",)),
    ("llama-7B", ("model=llama_7b",)),
)
SETUPS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("1×H200", "H200", ()),
    ("8×H100 SXM (FSDP2)", "H100 SXM", ("trainer=fsdp", "trainer.devices=8")),
)
CHECKPOINTING = ("none", "full")


@dataclass(frozen=True)
class Row:
    model: str
    setup: str
    checkpointing: str
    params: int
    micro_batch: int | None  # None: not even 1 fits
    peak_gib: float  # at that micro-batch (at 1 when none fits)
    usable_gib: float
    step_time: float | None
    tokens_per_sec: float | None
    days_10b: float | None  # days to 10B tokens
    mfu: float | None
    mfu_source: str


def sizing_rows(
    models: Sequence[tuple[str, Sequence[str]]] = MODELS,
    setups: Sequence[tuple[str, str, Sequence[str]]] = SETUPS,
    checkpointing: Sequence[str] = CHECKPOINTING,
) -> list[Row]:
    from gptlab.compose import compose_config
    from gptlab.hardware import lookup
    from gptlab.planning.options import setup_from
    from gptlab.planning.plan import GIB, HEADROOM, largest_micro_batch, plan

    rows = []
    for name, model_overrides in models:
        for label, gpu_name, setup_overrides in setups:
            gpu = lookup(gpu_name)
            for ac in checkpointing:
                overrides = [*model_overrides, *setup_overrides, f"model.activation_checkpointing={ac}"]
                setup = setup_from(compose_config(overrides))
                best = largest_micro_batch(setup, gpu, None, HEADROOM)
                shown = best if best is not None else plan(setup.replace(micro_batch=1), gpu)
                sp = shown.speed if best is not None else None
                rows.append(
                    Row(
                        model=name,
                        setup=label,
                        checkpointing=ac,
                        params=shown.total_params,
                        micro_batch=best.setup.micro_batch if best is not None else None,
                        peak_gib=shown.memory.peak / GIB,
                        usable_gib=shown.usable / GIB,
                        step_time=sp.step_time if sp else None,
                        tokens_per_sec=sp.tokens_per_sec if sp else None,
                        days_10b=(10e9 / sp.tokens_per_sec / 86400) if sp else None,
                        mfu=sp.mfu if sp else None,
                        mfu_source=sp.source if sp else "",
                    )
                )
    return rows


def format_rows(rows: Sequence[Row]) -> str:
    sources = list(dict.fromkeys(r.mfu_source for r in rows if r.mfu_source))
    head = (
        "| model | params | GPUs | activation checkpointing | micro-batch that fits | peak / device (GiB) "
        "| step time | tokens/s | 10B tokens | MFU |\n|---|---:|---|---|---:|---:|---:|---:|---:|---|"
    )
    lines = [head]
    for r in rows:
        if r.micro_batch is None:
            fit = "none (1 needs more)"
            peak = f"{r.peak_gib:.1f} at 1 (of {r.usable_gib:.1f})"
        else:
            fit = str(r.micro_batch)
            peak = f"{r.peak_gib:.1f} (of {r.usable_gib:.1f})"
        if r.step_time is None:
            step = tps = days = mfu = "—"
        else:
            step = f"{r.step_time:.2f} s"
            tps = f"{r.tokens_per_sec:,.0f}"
            days = f"{r.days_10b * 24:.1f} h" if r.days_10b < 2 else f"{r.days_10b:.1f} days"
            mfu = f"{r.mfu:.3f} [{sources.index(r.mfu_source) + 1}]"
        lines.append(
            f"| {r.model} | {r.params / 1e6:,.0f}M | {r.setup} | {r.checkpointing} | {fit} | {peak} "
            f"| {step} | {tps} | {days} | {mfu} |"
        )
    lines.append("")
    lines += [f"[{i + 1}] {s}" for i, s in enumerate(sources)]
    return "\n".join(lines)


def main(argv: Sequence[str]) -> int:
    import torch

    if argv:
        from gptlab.errors import exit_with

        exit_with(ValueError(f"--table takes no other arguments, got {' '.join(argv)!r}"))
    t0, cpu0 = time.perf_counter(), time.process_time()
    rows = sizing_rows()
    print(format_rows(rows))
    # CPU seconds too: on a shared machine the wall time says more about the neighbours
    print(
        f"\n(python scripts/plan.py --table: torch {torch.__version__}, {platform.machine()}, "
        f"{time.perf_counter() - t0:.0f} s of fake steps, {time.process_time() - cpu0:.0f} s CPU)"
    )
    return 0
