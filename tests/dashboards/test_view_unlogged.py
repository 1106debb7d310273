"""The wandb view leaves out a line panel whose keys the run never logs (issue 48 §6).

Oracle: the history each run would hold, written out here by hand from what the trainer logs
(docs/architecture.md, Metric names): Lightning logs train/loss and train/skipped_steps at the
steps (s + 1) % log_every_n_steps == 0, throughput from the second such interval, z-loss only with
optim.z_loss > 0, MFU only where the job's own records show it (its CSV header here); val/loss,
val/bpb, tokens_seen and lr at every validation. The job dirs' .hydra/config.yaml is written as Hydra
saves it, telemetry off (its panels are tests/dashboards/test_view_keys.py's)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from gptlab.dashboards.keys import shape_of
from gptlab.dashboards.view import Target, build_view, from_json, to_json

MODEL = {"n_layer": 1, "n_head": 2, "n_embd": 16, "block_size": 16, "vocab_size": 64}
EVERY_VALIDATION = {"val/loss", "val/bpb", "tokens_seen", "lr"}
LOG_STEPS = {"train/loss", "train/skipped_steps"}
THROUGHPUT = {"throughput/tokens_per_sec", "throughput/step_time"}


def job_dir(root: Path, max_steps: int, z_loss: float = 0.0, mfu: bool = False) -> Path:
    (root / ".hydra").mkdir(parents=True)
    cfg = {
        "model": MODEL, "callbacks": {"telemetry": {"enabled": False}},
        "trainer": {"max_steps": max_steps, "log_every_n_steps": 10},
        "optim": {"grad_clip": 0.0, "z_loss": z_loss},
    }  # fmt: skip
    (root / ".hydra" / "config.yaml").write_text(yaml.safe_dump(cfg))
    if mfu:  # a GPU whose peak is known: the job's CSV log has the column
        (root / "csv").mkdir()
        (root / "csv" / "metrics.csv").write_text("epoch,lr,step,throughput/mfu,train/loss\n")
    return root


def line_panels(root: Path) -> dict[str, tuple[list[str], str]]:
    """title → (y keys, x key) of every line panel of the run's view, as saved and loaded back."""
    view = from_json(to_json(build_view(shape_of(root), Target(entity="e", project="p", name="v"))))
    return {
        p.title: ([m.name for m in p.y], getattr(p.x, "name", p.x))
        for s in view.sections
        for p in s.panels
        if type(p).__name__ == "LinePlot"
    }


@pytest.mark.parametrize(
    ("kw", "history", "dropped"),
    [
        (  # 100 steps, no z-loss, a CPU: neither z-loss nor MFU is logged
            {"max_steps": 100}, EVERY_VALIDATION | LOG_STEPS | THROUGHPUT,
            {"z-loss term (mean log²Z)", "MFU"},
        ),
        (  # 5 steps at log_every_n_steps=10: no step is a log step, only the validations log
            {"max_steps": 5, "z_loss": 1e-4}, EVERY_VALIDATION,
            {"train loss", "train loss against tokens", "z-loss term (mean log²Z)",
             "updates skipped (non-finite or spike)", "throughput (tokens/s)", "step time (s)", "MFU"},
        ),
        (  # 15 steps: one log step, throughput's first interval skipped; z-loss on, MFU in the CSV
            {"max_steps": 15, "z_loss": 1e-4, "mfu": True}, EVERY_VALIDATION | LOG_STEPS | {"train/z_loss"},
            {"throughput (tokens/s)", "step time (s)", "MFU"},
        ),
        (  # 25 steps: all of it
            {"max_steps": 25, "z_loss": 1e-4, "mfu": True},
            EVERY_VALIDATION | LOG_STEPS | THROUGHPUT | {"train/z_loss", "throughput/mfu"}, set(),
        ),
    ],
)  # fmt: skip
def test_a_line_panel_names_keys_the_run_logs_or_is_left_out(
    tmp_path: Path, kw: dict[str, Any], history: set[str], dropped: set[str]
) -> None:
    panels = line_panels(job_dir(tmp_path, **kw))
    for title, (y, x) in panels.items():
        assert y, f"panel {title!r} names no key"
        assert set(y) <= history and x in history | {"Step"}, (title, y, x)
    assert not dropped & set(panels), sorted(dropped & set(panels))
    logged_once = {k for _, (y, _) in panels.items() for k in y}
    assert logged_once == history - {"tokens_seen"}  # every logged key has its panel (tokens: an x axis)
