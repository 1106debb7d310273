"""compile=true through train.py's path: how many graphs Dynamo builds, with and without the default
task and the end-of-run sample (issue 43: they used to add 3 compiles of the blocks to a run).

A run compiles three graphs: the blocks' training graph (one for both blocks: they are identical),
the loss's, and the blocks' validation graph (Lightning validates under inference mode, a guard of
its own). Validation builds its graph once, at the sanity check, and never again: every val batch has
one shape (samplers.even_batches; data.val_windows=6 at batch 4 reads two batches of 3, where a ragged
batch of 2 used to add a dynamic graph). The default task scored at the final validation and an
8-token sample run under `torch.compiler.set_stance("force_eager")` and add nothing: the run with them
builds exactly the graphs of the run without.

The backend is Dynamo's "eager": which frames Dynamo captures, and when a guard fails and makes it
recompile, is decided while tracing, before any backend sees the graph; inductor would only turn each
graph into kernels (minutes of C++ builds on this CPU) and cannot change their number.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lightning as L
import pytest
import torch

from gptlab.data.samplers import PAD, ShardedSubsetSampler, even_batches
from tests.training.rel_harness import train_here, with_callbacks

RUN = ["compile=true", "trainer.max_steps=4", "trainer.val_check_interval=2", "data.val_windows=6"]
WITH_TASK_AND_SAMPLE = ["callbacks.tasks.names=[val_continuation]", "sample.max_new_tokens=8"]


class GraphCount(L.Callback):
    """Dynamo's count of compiled graphs after each validation and each training step."""

    def __init__(self) -> None:
        self.after: list[tuple[str, int, int]] = []

    @staticmethod
    def graphs() -> int:
        return int(torch._dynamo.utils.counters["stats"]["unique_graphs"])

    def on_validation_epoch_end(self, trainer: L.Trainer, pl_module: Any) -> None:
        self.after.append(("val", trainer.global_step, self.graphs()))

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: Any, *args: Any) -> None:
        self.after.append(("train", trainer.global_step, self.graphs()))


def counted_run(run_dir: Path, cache: Path, monkeypatch: pytest.MonkeyPatch, *extra: str) -> dict[str, Any]:
    """One compiled tiny run (Dynamo's eager backend); its metrics, per-phase and final graph counts."""
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    original = torch.compile  # nn.Module.compile and the loss's loss_fn both call it

    def eager_backend(*args: Any, **kwargs: Any) -> Any:
        return original(*args, **{**kwargs, "backend": "eager"})

    monkeypatch.setattr(torch, "compile", eager_backend)
    counter = GraphCount()
    with_callbacks(monkeypatch, counter)
    try:
        metrics = train_here(run_dir, cache, *RUN, *extra)  # the sample runs after fit: counted too
        return {"metrics": metrics, "after": counter.after, "graphs": GraphCount.graphs()}
    finally:
        torch._dynamo.reset()


@pytest.mark.slow
def test_task_and_sample_compile_nothing_and_validation_compiles_once(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    alone = counted_run(tmp_path / "alone", cache, monkeypatch)
    both = counted_run(tmp_path / "both", cache, monkeypatch, *WITH_TASK_AND_SAMPLE)
    # the task was scored (at the final validation) and the sample drawn: their forwards ran
    assert both["metrics"]["tasks"]["val_continuation"]["step"] == 4, both["metrics"]
    assert both["metrics"]["sample"] and not alone["metrics"].get("tasks"), (alone, both)
    assert alone["graphs"] == 3, alone
    assert both["graphs"] == alone["graphs"], (alone, both)
    for run in (alone, both):
        val_graph = run["after"][0]  # the sanity check's validation built the validation graph
        assert val_graph == ("val", 0, 1), run["after"]
        assert all(n == 3 for phase, step, n in run["after"][1:] if step >= 2), run["after"]


@pytest.mark.parametrize(("count", "batch"), [(6, 4), (5, 4), (8, 4), (2, 16), (1, 1), (17, 16), (128, 16)])
def test_even_batches_one_size_at_most_the_batch_and_as_few_batches(count: int, batch: int) -> None:
    batches, size = even_batches(count, batch)
    assert size <= batch and batches == -(-count // batch)  # as many forwards as batch-size batches
    assert count <= batches * size < count + batches  # less than one padding window a batch


@pytest.mark.parametrize("world", [1, 2, 3])
def test_sharded_subset_every_window_once_in_equal_batches(world: int) -> None:
    subset, batch = list(range(10, 21)), 4  # 11 windows
    samplers = [ShardedSubsetSampler(subset, r, world, batch) for r in range(world)]
    real = sorted(i for s in samplers for i in s if i != PAD)
    assert real == subset
    assert len({len(s) for s in samplers}) == 1 and len({s.batch_size for s in samplers}) == 1
    assert all(len(s) % s.batch_size == 0 and s.batch_size <= batch for s in samplers)
