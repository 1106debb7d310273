"""Cadences count optimizer steps, also under gradient accumulation (issue 43, finding 9), and `auto`
scales with the run (gptlab.training.cadence).

A real run with `trainer.accumulate_grad_batches=2` records, at every event, the optimizer step it
happened at (`trainer.global_step`) and how many training batches Lightning had run; the oracle is the
cadence arithmetic written out here, in optimizer steps. Before the fix Lightning validated after 3
*micro-batches* (optimizer step 1.5, seen as global_step 1), then after 6 (step 3), ...
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import lightning as L
import pytest

from tests.training.rel_harness import compose_cfg, series, train_here, with_callbacks

STEPS, ACCUM, VAL, LOG, TASKS, CKPT = 9, 2, 3, 2, 4, 4
TASK_ROWS = '{"context": "def f(x):", "choices": [" return x", " pass"], "answer": 0}\n'


class Events(L.Callback):
    """The optimizer step (and the training batches run) at each validation, task evaluation,
    telemetry log and checkpoint save."""

    def __init__(self) -> None:
        self.validations: list[tuple[int, int]] = []
        self.saves: list[int] = []
        self.batches = 0

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: Any, out: Any, batch: Any, i: int) -> None:
        self.batches += 1

    def on_validation_end(self, trainer: L.Trainer, pl_module: Any) -> None:
        if not trainer.sanity_checking:
            self.validations.append((trainer.global_step, self.batches))

    def on_save_checkpoint(self, trainer: L.Trainer, pl_module: Any, checkpoint: dict[str, Any]) -> None:
        self.saves.append(trainer.global_step)

    def on_train_end(self, trainer: L.Trainer, pl_module: Any) -> None:
        by_name = {type(c).__name__: c for c in trainer.callbacks}
        self.tasks = list(by_name["TaskEvaluation"].evaluations)
        self.telemetry = [step for step, _ in by_name["LayerTelemetry"].history]  # 0-based, as logged


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory, cache: Path) -> dict[str, Any]:
    """9 optimizer steps of 2 micro-batches: validation every 3 steps, telemetry every 2, tasks
    every 4, a checkpoint every 4 (off the validations)."""
    root = tmp_path_factory.mktemp("cadence")
    task = root / "tiny_task.jsonl"
    task.write_text(TASK_ROWS)
    events = Events()
    with pytest.MonkeyPatch.context() as mp:
        with_callbacks(mp, events)
        summary = train_here(
            root / "run",
            cache,
            f"trainer.max_steps={STEPS}",
            f"trainer.accumulate_grad_batches={ACCUM}",
            f"trainer.val_check_interval={VAL}",
            f"trainer.log_every_n_steps={LOG}",
            f"callbacks.tasks.names=[{task}]",
            f"callbacks.tasks.every_n_steps={TASKS}",
            f"callbacks.checkpoint_every_n_steps={CKPT}",
        )
    return {"events": events, "summary": summary, "dir": root / "run"}


def test_validation_counts_optimizer_steps_under_accumulation(run: dict[str, Any]) -> None:
    ev = run["events"]
    # every VAL optimizer steps, after that step's last micro-batch, and the final step
    want = sorted({*range(VAL, STEPS + 1, VAL), STEPS})
    assert ev.validations == [(s, s * ACCUM) for s in want]
    assert run["summary"]["steps"] == STEPS
    # the CSV's val/loss rows sit at each validation's 0-based step index
    assert sorted(series(run["dir"], "val/loss")) == [s - 1 for s in want]


def test_tasks_telemetry_and_checkpoints_count_optimizer_steps(run: dict[str, Any]) -> None:
    ev = run["events"]
    vals = [s for s, _ in ev.validations]
    # tasks: the first validation at or after each multiple of TASKS, and the final one
    due, last = [], 0
    for s in vals:
        if s == STEPS or s // TASKS > last // TASKS:
            due.append(s)
            last = s
    assert ev.tasks == due == [6, 9]
    # telemetry: optimizer steps n with n % LOG == 0, logged at index n - 1
    assert ev.telemetry == [n - 1 for n in range(1, STEPS + 1) if n % LOG == 0]
    # train/loss on the same log steps, and on the final step (Lightning logs when it stops)
    logged = series(run["dir"], "train/loss")
    assert sorted(logged) == sorted({*ev.telemetry, STEPS - 1})
    # metrics.json's train_curve: each log step once (not once per micro-batch), its logged loss
    curve = run["summary"]["train_curve"]
    assert [s for s, _ in curve] == [n for n in range(1, STEPS + 1) if n % LOG == 0]
    assert all(loss == pytest.approx(logged[s - 1], rel=1e-6) for s, loss in curve)
    # checkpoints: every CKPT optimizer steps (ModelCheckpoint's every_n_train_steps reads
    # global_step). Lightning also "saves" at step 0, deferred to the first validation for want of
    # val/loss: that save lands at step 3; and the run's end writes last.ckpt
    assert sorted(set(ev.saves) - {vals[0]}) == sorted({*range(CKPT, STEPS + 1, CKPT), STEPS})


@pytest.mark.parametrize(("max_steps", "accumulate"), [(500, 3), (2001, 1), (600_000, 2)])
def test_auto_scales_with_the_run(max_steps: int, accumulate: int) -> None:
    """auto: validation every max(100, ⌈max_steps/20⌉) optimizer steps, tasks every
    max(1000, ⌈max_steps/10⌉); Lightning is handed the validation interval in micro-batches."""
    from gptlab.training.app import validate
    from gptlab.training.callbacks.summary import RunSummary
    from gptlab.training.callbacks.telemetry import LayerTelemetry
    from gptlab.training.trainer import build_callbacks, build_trainer

    raw = compose_cfg(
        f"trainer.max_steps={max_steps}", f"trainer.accumulate_grad_batches={accumulate}",
        "trainer.accelerator=cpu", "logger=none",
    )  # fmt: skip
    cfg = validate(raw)
    assert (cfg.trainer.val_check_interval, cfg.callbacks.tasks.every_n_steps) == ("auto", "auto")
    val_every = max(100, math.ceil(max_steps / 20))
    trainer = build_trainer(cfg, "cpu", 1, Path("unused"), [], [])
    assert trainer.val_check_interval == val_every * accumulate  # in training batches
    built = build_callbacks(cfg, Path("unused"), RunSummary(Path("unused")), tasks=[])
    (telemetry,) = [c for c in built if isinstance(c, LayerTelemetry)]
    log_every = cfg.trainer.log_every_n_steps
    assert telemetry.figures_every == -(-max(1000, -(-max_steps // 10)) // log_every)  # in log steps

    from gptlab.training.cadence import figures_every, task_every
    from gptlab.training.cadence import val_every as resolved

    for n in (1, 99, 500, 600, 2000, 2001, 5000, 100_000, 600_000):
        assert resolved("auto", n) == max(100, -(-n // 20))
        assert task_every("auto", n) == max(1000, -(-n // 10))
        assert (task_every(None, n), task_every(7, n), resolved(7, n)) == (None, 7, 7)
    assert (resolved("auto", 5000), task_every("auto", 100_000)) == (250, 10_000)
    # figures, in log steps: a 600-step run (60 log steps of 10) redraws none before its end (it
    # drew at step 500 under the old fixed 50); 100,000 steps redraw every 10,000 (was every 500)
    assert [figures_every("auto", n, 10) for n in (600, 1000, 10_001, 100_000)] == [100, 100, 101, 1000]
    assert (figures_every("auto", 600, 1), figures_every(50, 600, 10)) == (1000, 50)


def test_default_run_validates_every_100_and_scores_tasks_once() -> None:
    """The default run (500 steps): validations at 100..500 as before auto, the tasks only at the
    final validation (auto's 1,000-step floor is past its end)."""
    from gptlab.training.cadence import task_every, val_every

    cfg = compose_cfg()
    steps = cfg.trainer.max_steps
    assert steps == 500
    every = val_every(cfg.trainer.val_check_interval, steps)
    vals = list(range(every, steps + 1, every))
    assert vals == [100, 200, 300, 400, 500]
    t = task_every(cfg.callbacks.tasks.every_n_steps, steps)
    assert [s for s in vals if s == steps or s // t > 0] == [500]


@pytest.mark.parametrize(
    ("override", "field"),
    [
        ("trainer.val_check_interval=0", "trainer.val_check_interval=0"),
        ("trainer.val_check_interval=often", "trainer.val_check_interval='often'"),
        ("trainer.val_check_interval=null", "trainer.val_check_interval=None"),
        ("callbacks.tasks.every_n_steps=-1", "callbacks.tasks.every_n_steps=-1"),
        ("callbacks.tasks.every_n_steps=1.5", "callbacks.tasks.every_n_steps=1.5"),
        ("callbacks.telemetry.figures_every=0", "callbacks.telemetry.figures_every=0"),
        ("callbacks.telemetry.figures_every=often", "callbacks.telemetry.figures_every='often'"),
    ],
)
def test_bad_cadence_is_one_line_naming_the_field(override: str, field: str) -> None:
    from gptlab.training.app import validate

    with pytest.raises(Exception, match="not accepted") as err:
        validate(compose_cfg(override))
    assert field in str(err.value) and "auto" in str(err.value)
    unit = "log steps" if "figures_every" in override else "optimizer steps"  # what the integer counts
    assert f"give an integer >= 1 ({unit})" in str(err.value)
