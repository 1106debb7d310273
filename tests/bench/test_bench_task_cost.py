"""dev/bench/tasks_cost.py (docs/performance.md, "Tasks in the loop") runs end to end on a tiny run: with
and without a task file in one round (train.py with callbacks.tasks.names and every_n_steps, as
docs/evaluation.md writes them), the tasks run checked to have scored, the cost figure recomputed from
the JSON record's own times."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_script
from tests.training.rel_harness import TINY

TASK = '{"context": "def f(x):\\n    return", "choices": [" x", " None"], "answer": 0}\n'


@pytest.mark.slow
def test_bench_task_cost_times_both_runs(tmp_path: Path) -> None:
    task = tmp_path / "tiny_task.jsonl"
    task.write_text(TASK)
    out = tmp_path / "bench.json"
    own = ("logger=", "trainer.enable_progress_bar", "callbacks.tasks")  # the bench sets these itself
    sizes = [o for o in TINY if not o.startswith(own)]
    tiny = [*sizes, "trainer.max_steps=4", "trainer.val_check_interval=2", "callbacks.tasks.every_n_steps=2"]
    sets = [a for o in tiny for a in ("--set", o)]
    proc = run_script(
        "dev/bench/tasks_cost.py", "--rounds", "1", "--task", str(task), "--work", str(tmp_path / "work"),
        "--json", str(out), *sets, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "median cost of the task evaluation" in proc.stdout
    (row,) = json.loads(out.read_text())["rounds"]
    assert row["tasks"]["tiny_task"]["items"] == 1 and row["steps"] == 4
    assert row["tasks"]["tiny_task"]["step"] == 4  # the last evaluation (after steps 2 and 4)
    # train.log's two lines (milliseconds on a one-item task: >= 0, not > 0)
    assert len(row["evals_s"]) == 2 and all(x >= 0 for x in row["evals_s"])
    assert row["cost_share"] == pytest.approx(
        (row["wall_with_s"] - row["wall_without_s"]) / (row["steps"] * row["step_time_s"])
    )
