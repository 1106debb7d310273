"""CPU milliseconds per training step spent in each default callback and each telemetry signal,
split into plain steps, log steps and attention log steps, on the path users run.

Why: the difference between a run with telemetry and one without is swamped by a shared machine's
noise; the CPU time spent inside each piece (one torch thread: a process waiting for a core is not
charged) is not. This runs `gptlab.bench.lightning_loop.lightning_run` (the app's Trainer and default
callbacks, telemetry logging every `every` steps) and clocks, with `time.process_time`:

- every `on_*` hook of every callback (inclusive of what it calls);
- inside them: LayerTelemetry's tap (`on_stream`: act_rms and the attention statistics), the
  attention statistics alone, the weight copy before the optimizer step, the update norms after it,
  the guard's per-group gradient norms, the pack/all-reduce/naming (`reduce_metrics`), the loggers'
  `log_metrics`;
- the module's pieces: the training step, the loss (the log step's eager path with its logit
  moments, and the moments alone), the non-finite guard's norms (every step, in clipping), its
  `on_train_batch_end` and every `self.log`.

Clocks nest (a hook's time includes the pieces inside it). Per step: the median over the steps of a
kind (plain, log, attention log) of the CPU time of every piece that ran in that step.

    python -m dev.bench.callback_costs --steps 20
    python -m dev.bench.callback_costs --steps 40 model.norm=layernorm model.ffn=gelu model.pos_emb=learned
"""

from __future__ import annotations

import argparse
import collections
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import lightning as L
import torch


class Clocks:
    """CPU seconds per (batch, piece): every wrapped callable adds its time to the batch in progress."""

    def __init__(self) -> None:
        self.where: Callable[[], int] = lambda: -1  # the step in progress (0-based)
        self.cost: dict[int, dict[str, float]] = collections.defaultdict(
            lambda: collections.defaultdict(float)
        )
        self.calls: dict[int, dict[str, int]] = collections.defaultdict(lambda: collections.defaultdict(int))
        self.step_cpu: dict[int, float] = {}
        self.attention: set[int] = set()

    def wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                step = self.where()
                self.cost[step][name] += time.process_time() - t0
                self.calls[step][name] += 1

        return timed

    def patch(self, obj: Any, attr: str, name: str) -> None:
        """Replace obj.attr (a method of an instance, or a module's function) by its clocked self."""
        setattr(obj, attr, self.wrap(name, getattr(obj, attr)))


class Instrument(L.Callback):
    """At setup, clocks every other callback's hooks and the module's pieces; stamps each batch."""

    def __init__(self, clocks: Clocks) -> None:
        self.clocks = clocks
        self._t0: float | None = None

    def setup(self, trainer: L.Trainer, pl_module: Any, stage: str) -> None:
        from gptlab.training import module as module_mod
        from gptlab.training.callbacks import telemetry as telemetry_mod
        from gptlab.training.callbacks.telemetry import LayerTelemetry

        c = self.clocks
        progress = trainer.fit_loop.epoch_loop.batch_progress.total
        c.where = lambda: progress.ready - 1  # counted before the batch's first hook, one a step
        for cb in trainer.callbacks:
            if cb is self or type(cb).__name__ == "StepTimer":
                continue
            for name in dir(type(cb)):
                if name.startswith("on_") and getattr(type(cb), name) is not getattr(L.Callback, name, None):
                    c.patch(cb, name, f"{type(cb).__name__}.{name}")
            if isinstance(cb, LayerTelemetry):
                for name in ("weights_before", "update_sq", "_guard_grad_sq", "arm", "disarm"):
                    c.patch(cb, name, f"  telemetry.{name}")
                self._telemetry = cb
        telemetry_mod.attention_stats = c.wrap("    attention_stats", telemetry_mod.attention_stats)
        telemetry_mod.reduce_metrics = c.wrap("  telemetry.reduce_metrics", telemetry_mod.reduce_metrics)
        module_mod.logit_moments = c.wrap("    module.logit_moments", module_mod.logit_moments)
        for logger in trainer.loggers:
            c.patch(logger, "log_metrics", f"  {type(logger).__name__}.log_metrics")
        for name in (
            "training_step",
            "_token_objective",
            "on_train_batch_end",
            "configure_gradient_clipping",
            "log",
        ):
            c.patch(pl_module, name, f"module.{name}")
        c.patch(pl_module.nonfinite, "total_norm", "  module.nonfinite.total_norm")

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: Any, batch: Any, batch_idx: int) -> None:
        telemetry = getattr(self, "_telemetry", None)
        if telemetry is not None and telemetry._is_log_step(trainer):
            due = (
                trainer.global_step in telemetry.forced
                or len(telemetry.history) % telemetry.attention_every == 0
            )
            if due and telemetry.attention:
                self.clocks.attention.add(trainer.global_step)

    def on_train_batch_end(
        self, trainer: L.Trainer, pl_module: Any, outputs: Any, batch: Any, i: int
    ) -> None:
        now = time.process_time()
        if self._t0 is not None:
            self.clocks.step_cpu[trainer.global_step - 1] = now - self._t0
        self._t0 = now


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def report(clocks: Clocks, every: int, warmup: int) -> str:
    """The table: median CPU ms per step of each piece, by kind of step."""
    steps = sorted(s for s in clocks.step_cpu if s >= warmup)
    log = [s for s in steps if (s + 1) % every == 0]
    kinds = {
        "plain": [s for s in steps if (s + 1) % every != 0],
        "log": [s for s in log if s not in clocks.attention],
        "attention log": [s for s in log if s in clocks.attention],
    }
    names = list(dict.fromkeys(n for s in steps for n in clocks.cost[s]))  # first call first
    head = f"{'piece':52s}" + "".join(f"{f'{k} ({len(v)})':>20s}" for k, v in kinds.items())
    whole = [_median([clocks.step_cpu[s] * 1e3 for s in v]) for v in kinds.values()]
    lines = [head, "-" * len(head), f"{'whole step (CPU ms)':52s}" + "".join(f"{w:>20.2f}" for w in whole)]
    for n in names:
        row = f"{n:52s}"
        for v in kinds.values():
            ms = _median([clocks.cost[s].get(n, 0.0) * 1e3 for s in v])
            calls = _median([clocks.calls[s].get(n, 0) for s in v])
            row += f"{ms:>13.3f} ×{calls:<5.0f}"
        lines.append(row)
    return "\n".join(lines)


def main(argv: Sequence[str]) -> int:
    from gptlab.bench.lightning_loop import lightning_run, quiet
    from gptlab.bench.options import compose
    from gptlab.data.datamodule import TokenDataModule
    from gptlab.training.app import model_config

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=40, help="timed steps after the warm-up")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--every", type=int, default=10, help="telemetry cadence (every n steps)")
    ap.add_argument("--threads", type=int, default=1)
    args, overrides = ap.parse_known_args(argv)
    torch.set_num_threads(args.threads)
    cfg = compose([o for o in overrides if not o.startswith("bench.")])
    dm = TokenDataModule(cfg.data, block_size=cfg.model.block_size, seed=cfg.seed)
    with quiet():
        dm.prepare()
    model_cfg = model_config(cfg, dm.vocab_size, dm.tokenizer)
    clocks = Clocks()
    with tempfile.TemporaryDirectory() as tmp, quiet():
        lightning_run(
            cfg,
            model_cfg,
            torch.device("cpu"),
            "cpu",
            args.every,
            args.warmup,
            args.steps,
            Path(tmp),
            extra=[Instrument(clocks)],
        )
    print("command: python -m dev.bench.callback_costs " + " ".join(argv))
    m = model_cfg
    print(
        f"model: L={m.n_layer} d={m.n_embd} T={m.block_size} V={m.vocab_size} batch {cfg.data.batch_size}; "
        f"{args.threads} thread(s); telemetry every {args.every}; CPU ms per step (time.process_time), "
        "median over the steps of each kind; ×calls per step"
    )
    print(report(clocks, args.every, args.warmup))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
