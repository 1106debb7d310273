"""What a benchmark measured, as plain data: every run of every round, and the setup it ran under
(the table is computed from this; scripts/bench.py also writes it as JSON)."""

from __future__ import annotations

import dataclasses
import statistics
from dataclasses import dataclass, field
from typing import Any


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
