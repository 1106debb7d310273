"""Where a short run's seconds go: `python train.py` split into its phases, CPU and wall seconds.

usage: python -m dev.bench.short_run [--steps 20] [--shape small|shakespeare|tiny] [--project 600]
                                     [--text PATH] [--set k=v ...] [--json PATH]
One run of train.py's own path (hydra.main, run_job, train, the run-end view) in a fresh interpreter
with one thread, its functions wrapped by a phase clock: every CPU second (time.process_time, the
whole process) and wall second goes to exactly one phase, the innermost running one: the imports,
compose (Hydra up to `train`), task files, data, model, loggers (wandb init / finish), the first
optimizer step, the other steps, validation, tasks, checkpoints, figures, the sample, metrics.json,
the run-end wandb view, and the fit loop's own rest. Child processes' CPU (wandb's service) is one
more row. The steps' phase is per step; `--project N` prints what a run of N steps would cost: the
fixed phases once, the steps N times, the validations and task evaluations scaled by the count the
cadence gives at N. The shape `shakespeare` is nanoGPT's config/train_shakespeare_char.py (6 layers,
6 heads, d 384, T 256, batch 64, dropout 0.2, lr 1e-3 → 1e-4, β2 0.99, warmup 100) on a local text:
~1 TFLOP a step, ~10 s on one CPU thread; `small` (the default) the same config at 4 layers, 4 heads,
d 128, T 64, batch 16 (~0.1 s a step); `tiny` 2 layers, d 64, batch 8 (the tests).
See docs/performance.md, "Short runs".
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any

from dev.bench.child import REPO, run_child
from dev.bench.corpus import local_text
from gptlab.heap import imports_unscanned
from gptlab.training.early_imports import WANDB_LAUNCH_INPUTS

SHAKESPEARE = [
    "model.n_layer=6", "model.n_head=6", "model.n_embd=384", "model.block_size=256", "model.dropout=0.2",
    "data.batch_size=64", "optim.lr=1e-3", "optim.min_lr=1e-4", "optim.beta2=0.99",
    "optim.warmup_steps=100", "data=text", "data.doc_separator='\\n\\n'",
]  # fmt: skip
# the same config at a size one CPU thread trains in ~0.1 s a step (the full shape takes ~10 s a step:
# 1 TFLOP), for both sides of the pair benchmark too; and a tiny one for the tests
SMALL = {"n_layer": 4, "n_head": 4, "n_embd": 128, "block_size": 64, "batch_size": 16}
TINY = {"n_layer": 2, "n_head": 2, "n_embd": 64, "block_size": 64, "batch_size": 8}
SHAPES = {"small": SMALL, "tiny": TINY}


def shape_overrides(shape: str) -> list[str]:
    """gptlab overrides of nanoGPT's shakespeare_char config, at `shape`'s size."""
    if shape == "shakespeare":
        return SHAKESPEARE
    size = [f"{'data' if k == 'batch_size' else 'model'}.{k}={v}" for k, v in SHAPES[shape].items()]
    return [*SHAKESPEARE, *size]


# what `import lightning` imports beyond torch, named so the breakdown splits lightning's import row:
# lightning.fabric.utilities.imports evaluates compare_version("torchmetrics", ...), which imports
# torchmetrics, which imports transformers (functional/text/bert.py), scipy.signal (its audio metrics)
# and matplotlib.pyplot (utilities/plot.py) because they are installed. Imported first, in this order,
# each is timed alone; `lightning` is then the rest (torch._dynamo among it). A test checks that a bare
# `import lightning` imports every one of them, so none is a cost the run would not pay.
LIGHTNING_PULLS = ("transformers", "scipy.signal", "matplotlib.pyplot", "torchmetrics")
FIXED = ("imports", "compose", "task files", "data", "model", "loggers (wandb init)", "fit start")
END = ("figures", "sample", "metrics.json", "wandb finish", "run-end view", "exit")


class PhaseClock:
    """Attributes CPU and wall seconds to the phase running now (a stack: a wrapped call inside
    another takes its own seconds)."""

    def __init__(self) -> None:
        self.cpu: dict[str, float] = {}
        self.wall: dict[str, float] = {}
        self.count: dict[str, int] = {}
        self.stack = ["imports"]
        self._t = (time.process_time(), time.perf_counter())

    def _charge(self) -> None:
        cpu, wall = time.process_time(), time.perf_counter()
        top = self.stack[-1]
        self.cpu[top] = self.cpu.get(top, 0.0) + cpu - self._t[0]
        self.wall[top] = self.wall.get(top, 0.0) + wall - self._t[1]
        self._t = (cpu, wall)

    def enter(self, name: str) -> None:
        self._charge()
        self.stack.append(name)
        self.count[name] = self.count.get(name, 0) + 1

    def leave(self) -> None:
        self._charge()
        self.stack.pop()

    def switch(self, name: str) -> None:
        """Replace the current phase (the fit loop's hooks are not nested calls)."""
        self._charge()
        self.stack[-1] = name
        self.count[name] = self.count.get(name, 0) + 1

    def wrap(self, owner: Any, attr: str, name: str) -> None:
        original = getattr(owner, attr)

        def timed(*args: Any, **kwargs: Any) -> Any:
            self.enter(name)
            try:
                return original(*args, **kwargs)
            finally:
                self.leave()

        setattr(owner, attr, timed)


def instrument(clock: PhaseClock) -> None:
    """Wrap the run's phases (after the imports: the modules must exist to be wrapped)."""
    import lightning as L

    import gptlab.dashboards.cli as view
    import gptlab.training.app as app
    from gptlab.data.datamodule import TokenDataModule
    from gptlab.training.callbacks.tasks import TaskEvaluation
    from gptlab.training.callbacks.telemetry import LayerTelemetry
    from gptlab.training.checkpoint_io import AtomicCheckpointIO
    from gptlab.training.module import GPTLightningModule

    original_train = app.train

    def train(*args: Any, **kwargs: Any) -> Any:
        clock.switch("fit start")  # what follows train's own wrapped calls, until the first step
        return original_train(*args, **kwargs)

    app.train = train
    clock.wrap(app, "task_callbacks", "task files")
    clock.wrap(TokenDataModule, "prepare", "data")
    clock.wrap(TokenDataModule, "setup", "data")
    # the class itself stays unwrapped (save_hyperparameters reads its __init__'s frame): app's name
    # for it becomes a timed factory
    app.GPTLightningModule = lambda *a, **k: GPTLightningModule(*a, **k)
    clock.wrap(app, "GPTLightningModule", "model")
    clock.wrap(app, "build_loggers", "loggers (wandb init)")
    clock.wrap(app, "finish_wandb", "wandb finish")
    clock.wrap(app, "generate_sample", "sample")
    clock.wrap(TaskEvaluation, "on_validation_epoch_end", "tasks")
    clock.wrap(AtomicCheckpointIO, "save_checkpoint", "checkpoints")
    clock.wrap(LayerTelemetry, "draw", "figures")
    clock.wrap(view, "write_at_run_end", "run-end view")
    original_write = app.RunSummary.write

    def write(self: Any, trainer: Any, status: str, **kw: Any) -> Any:
        clock.enter("metrics.json")
        try:
            return original_write(self, trainer, status, **kw)
        finally:
            clock.leave()

    app.RunSummary.write = write

    class Hooks(L.Callback):
        """Steps and validations: the fit loop's hooks switch the phase."""

        steps = 0

        def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, i: int) -> None:
            clock.switch("first step" if trainer.global_step == 0 else "steps")

        def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, i: int) -> None:
            clock.switch("fit loop (rest)")

        def on_validation_start(self, trainer: Any, pl_module: Any) -> None:
            clock.switch("sanity check" if trainer.sanity_checking else "validation")

        def on_validation_end(self, trainer: Any, pl_module: Any) -> None:
            clock.switch("fit loop (rest)")

        def on_fit_end(self, trainer: Any, pl_module: Any) -> None:
            clock.switch("fit end")

    original_build = app.build_callbacks
    app.build_callbacks = lambda *a, **k: [Hooks(), *original_build(*a, **k)]


def wandb_logger_on(overrides: list[str]) -> bool:
    """Whether the run starts wandb, so train.py imports its launch models before Lightning
    (gptlab.training.early_imports); the logger overrides the bench's callers use."""
    off = {"logger=csv", "logger=none", "logger.wandb=false", "logger.mode=disabled"}
    return not any(o.replace(" ", "") in off for o in overrides)


def child(spec: dict[str, Any]) -> dict[str, Any]:
    """The run in this interpreter; the phase table as JSON."""
    clock = PhaseClock()
    imports: dict[str, float] = {}
    modules = (
        "torch",
        *((WANDB_LAUNCH_INPUTS,) if wandb_logger_on(spec["overrides"]) else ()),  # train.py's early import
        *LIGHTNING_PULLS,
        "lightning",
        "hydra",
        "gptlab.training.app",
        "gptlab.dashboards.cli",
    )
    with imports_unscanned():  # as train.py imports (gptlab.heap): the collector paused, then frozen
        for module in modules:
            t = time.process_time()
            __import__(module)
            imports[module] = time.process_time() - t
    instrument(clock)
    clock.switch("compose")
    sys.argv = ["train.py", *spec["overrides"]]
    sys.path.insert(0, str(REPO))
    import runpy

    try:
        runpy.run_path(str(REPO / "train.py"), run_name="__main__")
    except SystemExit as err:
        if err.code not in (None, 0):
            raise
    clock.switch("exit")
    clock._charge()
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {
        "cpu": clock.cpu, "wall": clock.wall, "count": clock.count, "imports": imports,
        "children_cpu": children.ru_utime + children.ru_stime,
    }  # fmt: skip


def table(result: dict[str, Any], steps: int, project: int, val_every: int, tasks_at: int) -> list[str]:
    """The phases in run order: seconds now, and projected to `project` steps."""
    cpu, wall, count = result["cpu"], result["wall"], result["count"]
    per_step = cpu.get("steps", 0.0) / max(1, steps - 1)
    vals = max(1, count.get("validation", 1))
    n_val = math.ceil(project / val_every)
    per_task = cpu.get("tasks", 0.0) / vals  # scored at every validation of the measured run
    scale = {"steps": (project - 1) / max(1, steps - 1), "validation": n_val / vals}
    order = [*FIXED, "sanity check", "first step", "steps", "fit loop (rest)", "validation", "tasks",
             "checkpoints", "fit end", *END]  # fmt: skip
    lines = [
        f"| phase | CPU s ({steps} steps) | wall s | calls | CPU s at {project} steps |",
        "|---|---|---|---|---|",
    ]
    total_now = total_proj = 0.0
    for name in order:
        if name not in cpu:
            continue
        proj = cpu[name] * scale.get(name, 1.0)
        if name == "tasks":
            proj = per_task * tasks_at
        if name == "checkpoints":
            proj = cpu[name] / vals * n_val
        total_now += cpu[name]
        total_proj += proj
        lines.append(f"| {name} | {cpu[name]:.2f} | {wall[name]:.2f} | {count.get(name, 1)} | {proj:.2f} |")
    kids = result["children_cpu"]
    lines.append(f"| child processes (wandb service) | {kids:.2f} | | | {kids:.2f} |")
    lines.append(f"| **total** | **{total_now + kids:.2f}** | | | **{total_proj + kids:.2f}** |")
    imports = ", ".join(f"{m} {s:.2f}" for m, s in result["imports"].items())
    lines.append("")
    lines.append(f"imports (CPU s, cumulative order): {imports}; one step {per_step * 1000:.0f} ms CPU")
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--steps", type=int, default=20, help="optimizer steps of the measured run")
    p.add_argument("--project", type=int, default=600, help="project the table to this many steps")
    p.add_argument("--shape", choices=("small", "shakespeare", "tiny"), default="small")
    p.add_argument("--text", help="the corpus (default: ~1.1 MB of the Python stdlib's sources)")
    p.add_argument("--work", default="/tmp/gptlab_short_run", help="run dir and token cache")
    p.add_argument("--set", action="append", default=[], help="more train.py overrides")
    p.add_argument("--json", help="also write the raw phases here")
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return 0
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    text = Path(args.text) if args.text else local_text(work / "corpus.txt")
    val_every = max(2, args.steps // 2)  # two validations: one mid-run, the final one
    shape = shape_overrides(args.shape)
    overrides = [
        *shape, f"data.path={text}", f"data.cache_dir={work / 'cache'}", f"hydra.run.dir={work / 'run'}",
        f"trainer.max_steps={args.steps}", f"trainer.val_check_interval={val_every}",
        "trainer.accelerator=cpu", "callbacks.tasks.every_n_steps=null", *args.set,
    ]  # fmt: skip
    os.environ.setdefault("WANDB_MODE", "offline")
    run_child("dev.bench.short_run", {"overrides": overrides}, "the run")  # warm: the token cache
    result = run_child("dev.bench.short_run", {"overrides": overrides}, "the run")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    from gptlab.training.cadence import task_every
    from gptlab.training.cadence import val_every as auto_val

    interval = auto_val("auto", args.project)
    every = task_every("auto", args.project)
    vals = sorted({*range(interval, args.project + 1, interval), args.project})
    tasks_at = len([s for s in vals if s == args.project or (every and s // every > 0)])
    print(f"shape {args.shape}, {args.steps} steps, one thread, validations every {val_every} "
          f"(tasks at each); projected: auto cadence at {args.project} steps ({len(vals)} validations, "
          f"{tasks_at} task evaluation(s))")  # fmt: skip
    print("\n".join(table(result, args.steps, args.project, interval, tasks_at)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
