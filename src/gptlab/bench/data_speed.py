"""Whether data keeps up: the train DataLoader's batches/s on its own, and the time to tokenize and
pack the configured corpus cold (a fresh cache directory) and then from its cache."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

from gptlab.config import TrainConfig
from gptlab.data.datamodule import TokenDataModule


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
