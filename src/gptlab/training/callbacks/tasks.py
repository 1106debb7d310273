"""Downstream tasks scored inside the run: `task/<name>/acc`, `acc_norm`, `bpb` at validations.

At a validation (never the sanity check) this callback scores every task of `callbacks.tasks.names`
with gptlab.evaluation.scoring, on the LightningModule's model in eval mode, under the run's
precision context, and logs the three numbers through `self.log` at the validation's step (the CSV
row of `val/loss`). It runs at the first validation at or after each multiple of `every_n_steps`
optimizer steps (every validation when null; auto scales with the run: gptlab.training.cadence) and
always at the run's final one (callbacks/final_validation.py); metrics.json's `tasks` holds each
task's last evaluation (RunSummary reads `summary_fields`).

Items are read once per run: task files when the callback is built (a bad file stops the run before
training), built-in tasks at `setup`, from the run's own set-up datamodule. At `setup`, before step 1,
every task's requests are encoded with the run's tokenizer and fitted to its block_size, so a request
that cannot be scored (a choice merged into its context's last token) stops the run before it
trains. The encoded requests are kept, and the scorer's packed batches built from them at the first
evaluation are kept too (evaluation/shared_prefix.py, `plan`): a later evaluation runs the forwards.
A built-in task the data cannot give (val_continuation needs a val document of 80 tokens and an
end-of-text id) is skipped with a warning, so the default config still trains on any corpus; a task
file never is.

Under DDP each rank scores a contiguous share of the items and the per-item log-likelihoods are gathered
(all_gather_object), so every rank summarizes all items in their order: one process's result, up to
the float rounding of different batch compositions. Under FSDP2 every rank runs the same number of
forwards (the sharded blocks all-gather their parameters in each): a rank with fewer batches runs
one-token forwards to match. Validation's RNG state is put back by callbacks/rng.py after this runs
(and scoring draws none: dropout is off in eval mode).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import lightning as L
import torch
import torch.distributed as dist

from gptlab.config import TasksConfig
from gptlab.evaluation.formats import Item
from gptlab.evaluation.run import BUILTIN, cut_note, load_task
from gptlab.evaluation.scoring import EncodedTask, TaskResult, encode_task, score_task, summarize
from gptlab.training.cadence import task_every

log = logging.getLogger(__name__)
TOOL = "train.py (callbacks.tasks)"  # how errors about what the loop scores name it
LOGGED = ("acc", "acc_norm", "bpb")  # task/<name>/<metric> (docs/telemetry.md)


def display_name(name: str) -> str:
    """A task's metric name: a built-in task's own, or a task file's stem (hellaswag_val.jsonl ->
    hellaswag_val)."""
    return name if name in BUILTIN else Path(name).stem


def check_names(names: Sequence[str]) -> None:
    """Every name a built-in task or an existing file, no two with one metric name (one line each)."""
    builtin = f"built-in: {', '.join(BUILTIN)}" if BUILTIN else "there are no built-in tasks yet"
    seen: dict[str, str] = {}
    for name in names:
        if name not in BUILTIN and not Path(name).exists():
            raise ValueError(
                f"callbacks.tasks.names: {name!r} is neither a task file nor a built-in task; accepted: "
                "a .jsonl file path (HellaSwag or {context, choices, answer}) or an lm-eval .yaml "
                f"(docs/evaluation.md); {builtin}"
            )
        short = display_name(name)
        if short in seen:
            raise ValueError(
                f"callbacks.tasks.names: {seen[short]!r} and {name!r} both log as task/{short}/*; "
                "accepted: tasks with different names (a file's name without .jsonl)"
            )
        seen[short] = name


def share(n_items: int, rank: int, world_size: int) -> range:
    """The items rank `rank` scores: contiguous shares that cover 0..n_items-1 once, in order."""
    return range(rank * n_items // world_size, (rank + 1) * n_items // world_size)


def gather(obj: Any, world_size: int) -> list[Any]:
    """Every rank's `obj` in rank order (a collective: every rank calls it)."""
    if world_size == 1 or not (dist.is_available() and dist.is_initialized()):
        return [obj]
    out: list[Any] = [None] * world_size
    dist.all_gather_object(out, obj)
    return out


def is_sharded(model: torch.nn.Module) -> bool:
    """Whether FSDP2 shards the parameters (DTensors): then a forward is a collective."""
    from torch.distributed.tensor import DTensor

    return any(isinstance(p, DTensor) for p in model.parameters())


def task_lines(tasks: dict[str, dict[str, Any]]) -> list[str]:
    """The end-of-run lines: one per task of metrics.json's `tasks`."""
    return [
        f"task {name}: acc {m['acc']:.4f}, acc_norm {m['acc_norm']:.4f}, bpb {m['bpb']:.4f} "
        f"({m['items']} items, chance {m['chance']:.4f}, step {m['step']})"
        for name, m in tasks.items()
    ]


class TaskEvaluation(L.Callback):
    """Scores the configured tasks at validations and keeps each task's last result."""

    def __init__(self, cfg: TasksConfig) -> None:
        check_names(cfg.names)
        self.names = list(cfg.names)
        self.every = cfg.every_n_steps
        self.batch_size = cfg.batch_size
        # task files are read now, so a bad one stops the run before it trains
        self.items: dict[str, list[Item]] = {
            display_name(n): load_task(n, tool=TOOL) for n in self.names if n not in BUILTIN
        }
        self.skipped: dict[str, str] = {}  # built-in tasks this run's data cannot give: name -> why
        self.results: dict[str, dict[str, Any]] = {}  # name -> the last evaluation's metrics
        self.evaluations: list[int] = []  # the steps evaluated in this process (tests, cadence)
        self._warned: set[str] = set()  # tasks whose cut contexts were reported
        self.encoded: dict[str, EncodedTask] = {}  # name -> all items' requests (setup)
        self.mine: dict[str, EncodedTask] = {}  # name -> this rank's share, kept with its plans
        self.last_step = 0  # the step of the last evaluation (kept in checkpoints: resume keeps cadence)

    def setup(self, trainer: L.Trainer, pl_module: Any, stage: str) -> None:
        """Built-in tasks from the run's datamodule (Lightning set it up just before this hook)."""
        for name in self.names:
            if display_name(name) in self.items or name in self.skipped:
                continue
            try:
                self.items[display_name(name)] = load_task(name, trainer.datamodule)
            except ValueError as err:  # a built-in task this data cannot give (a small val split)
                self.skipped[name] = str(err)
                if trainer.global_rank == 0:
                    log.warning("task %s is skipped in this run: %s", name, err)
        # the configured order (files were read first)
        self.items = {
            display_name(n): self.items[display_name(n)] for n in self.names if n not in self.skipped
        }
        self.check_requests(trainer.datamodule.tokenizer, int(pl_module.model.cfg.block_size))

    def check_requests(self, tokenizer: Any, block: int) -> None:
        """Every task's requests encoded with the run's tokenizer and fitted to its block, before
        step 1: a choice the tokenizer merges into its context, or one longer than the block, stops
        the run now (one line naming the task, item and choice) instead of at the first scoring."""
        if self.items and tokenizer is None:
            raise ValueError(
                f"callbacks.tasks.names: {', '.join(self.items)} hold text, which this run's data has no "
                "tokenizer to encode (token ids without data.tokenizer_path); accepted: a "
                "data.tokenizer_path, or callbacks.tasks.names=[]"
            )
        for name, items in self.items.items():
            try:
                self.encoded[name] = encode_task(tokenizer, items, block)
            except ValueError as err:
                raise ValueError(f"callbacks.tasks.names: {err}") from None

    def state_dict(self) -> dict[str, Any]:
        return {"last_step": self.last_step}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.last_step = int(state_dict.get("last_step", 0))

    def due(self, trainer: L.Trainer) -> bool:
        """At the final validation; else at every validation (every=None) or at the first one at or
        after each multiple of `every` optimizer steps (auto: gptlab.training.cadence.task_every)."""
        step = trainer.global_step
        every = task_every(self.every, trainer.max_steps)
        if 0 < trainer.max_steps <= step or every is None:
            return True
        return step // every > self.last_step // every

    def on_validation_epoch_end(self, trainer: L.Trainer, pl_module: Any) -> None:
        if trainer.sanity_checking or not self.items or not self.due(trainer):
            return
        step = trainer.global_step
        start = time.perf_counter()
        model = pl_module.model
        was_training = model.training
        model.eval()
        try:
            # eager even with compiled blocks: scoring's (batch, length) shapes and no_grad would
            # each make Dynamo build more graphs (minutes apiece on a GPU at scale) for a few forwards
            with (
                torch.no_grad(),
                trainer.precision_plugin.forward_context(),
                torch.compiler.set_stance("force_eager"),
            ):
                for name, items in self.items.items():
                    metrics = self._score(trainer, model, pl_module.device, name)
                    if metrics["cut"] and name not in self._warned and trainer.global_rank == 0:
                        self._warned.add(name)
                        block = int(model.cfg.block_size)
                        level, note = cut_note(name, metrics["cut"], len(items), block)
                        log.log(level, "task %s", note)
                    for key in LOGGED:
                        # equal on every rank; sync_dist (max of equal values) only silences
                        # Lightning's warning about epoch-level values under DDP
                        pl_module.log(
                            f"task/{name}/{key}", float(metrics[key]), sync_dist=True, reduce_fx="max"
                        )
                    self.results[name] = {
                        **{k: metrics[k] for k in (*LOGGED, "items", "chance")},
                        "step": step,
                    }
        finally:
            model.train(was_training)
        self.last_step = step
        self.evaluations.append(step)
        if trainer.global_rank == 0:  # dev/bench/tasks_cost.py reads these seconds from train.log
            scored = ", ".join(f"{n} acc {r['acc']:.4f} bpb {r['bpb']:.4f}" for n, r in self.results.items())
            log.info("tasks scored at step %d in %.3f s: %s", step, time.perf_counter() - start, scored)

    def _score(self, trainer: L.Trainer, model: Any, device: torch.device, name: str) -> dict[str, Any]:
        """acc, acc_norm, bpb, items, chance over all items, this rank scoring its share."""
        world, rank = int(trainer.world_size), int(trainer.global_rank)
        items = self.items[name]
        if name not in self.encoded:  # setup encodes them; a callback driven without it encodes now
            self.encoded[name] = encode_task(trainer.datamodule.tokenizer, items, int(model.cfg.block_size))
        if name not in self.mine:
            self.mine[name] = self.encoded[name].share(share(len(items), rank, world))
        part = score_task(model, self.mine[name], self.batch_size, device)
        if world > 1 and is_sharded(model):
            self._match_forwards(model, device, items, world, rank)
        parts = gather((part.loglikelihoods, part.tokens, part.cut), world)
        result = TaskResult(
            items,
            [ll for p in parts for ll in p[0]],
            [t for p in parts for t in p[1]],
            sum(p[2] for p in parts),
        )
        return summarize(result)

    def _match_forwards(
        self, model: Any, device: torch.device, items: list[Item], world: int, rank: int
    ) -> None:
        """One-token forwards until this rank has run as many as the busiest rank (FSDP2)."""

        def batches(r: int) -> int:
            return math.ceil(
                sum(len(items[i].choices) for i in share(len(items), r, world)) / self.batch_size
            )

        for _ in range(max(batches(r) for r in range(world)) - batches(rank)):
            model(torch.zeros((1, 1), dtype=torch.long, device=device))

    def summary_fields(self) -> dict[str, Any]:
        """metrics.json's `tasks`: each task's last evaluation ({} when no task is configured)."""
        return {"tasks": dict(self.results)}
