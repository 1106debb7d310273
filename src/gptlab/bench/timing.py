"""How a run is timed: end-of-step stamps, the window after warm-up, CPU time, page faults, the time
spent inside one callback's hooks, and peak memory.

A step's time is the wall time between the ends of two consecutive optimizer steps (data fetch,
forward, backward, clipping, optimizer, callbacks and logging). On a GPU the device is synchronised
only at the two ends of the timed window, so only the window's sum is exact there.
"""

from __future__ import annotations

import contextlib
import gc
import re
import resource
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lightning as L
import torch

# (process CPU seconds, minor page faults, hook seconds) at one end of the window
Marks = tuple[float, int, float]


@dataclass
class Timing:
    """What one run measured over its timed window."""

    step_times: list[float]
    window: float
    cpu_window: float
    faults: float
    hook_seconds: float = 0.0


def sync(device: torch.device) -> None:
    """Wait for the GPU's queued work (a no-op on a CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def matmul_flops(device: torch.device, n: int, repeats: int, dtype: torch.dtype) -> list[float]:
    """FLOP/s of n×n @ n×n matmuls (2n³ each), one untimed call first; one sample per call."""
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    a @ b
    sync(device)
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        a @ b
        sync(device)
        samples.append(2 * n**3 / (time.perf_counter() - t0))
    return samples


def reset_peak_memory(device: torch.device) -> None:
    """Start a run's peak-memory count afresh."""
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


def counters(hooks: HookClock | None = None) -> Marks:
    """(process CPU seconds, minor page faults, hook time so far): read at the window's two ends."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return time.process_time(), int(usage.ru_minflt), hooks.total if hooks is not None else 0.0


def window_times(stamps: Sequence[float], warmup: int, steps: int) -> tuple[list[float], float]:
    """(per-step times, whole window) from the end-of-step stamps of warmup + steps steps."""
    if len(stamps) < warmup + steps:
        raise RuntimeError(f"only {len(stamps)} steps ran; {warmup + steps} were asked for")
    timed = stamps[warmup - 1 : warmup + steps]
    return [b - a for a, b in zip(timed, timed[1:], strict=False)], timed[-1] - timed[0]


def timing(stamps: Sequence[float], marks: Sequence[Marks], warmup: int, steps: int) -> Timing:
    """The Timing of a run from its end-of-step stamps and the counters at the window's ends."""
    times, window = window_times(stamps, warmup, steps)
    (cpu0, f0, h0), (cpu1, f1, h1) = marks[0], marks[-1]
    return Timing(times, window, cpu1 - cpu0, (f1 - f0) / steps, h1 - h0)


def window_end(step: int, warmup: int, steps: int) -> bool:
    """Whether the step (0-based) ends the warm-up or the timed window: where a run syncs and
    reads its counters, and nowhere else."""
    return step in (warmup - 1, warmup + steps - 1)


class StepTimer(L.Callback):
    """Stamps the end of every optimizer step (put it last: it then follows our other callbacks)."""

    def __init__(self, device: torch.device, warmup: int, steps: int, hooks: HookClock | None = None) -> None:
        self.device, self.warmup, self.steps, self.hooks = device, warmup, steps, hooks
        self.stamps: list[float] = []
        self.marks: list[Marks] = []

    def on_train_batch_end(
        self, trainer: L.Trainer, pl_module: Any, outputs: Any, batch: Any, i: int
    ) -> None:
        if window_end(len(self.stamps), self.warmup, self.steps):
            sync(self.device)  # the window's two ends only: no sync inside it
            self.marks.append(counters(self.hooks))
        self.stamps.append(time.perf_counter())
