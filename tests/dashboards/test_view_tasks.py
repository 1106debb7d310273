"""The wandb view's downstream-task section (issue 38, item 4): a panel per task metric, grouped by
arm like the other curves, present only when the run's config names tasks.

Oracle: the key names of CONTRACT38 §2-3 written out here by hand (`task/<name>/{acc,acc_norm,bpb}`,
a file task named by its file's stem), against job dirs whose .hydra/config.yaml the test writes as
Hydra saves it (the `tasks` block as conf/callbacks/default.yaml puts it, under `callbacks`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from gptlab.dashboards.keys import RunShape, families, shape_of
from gptlab.dashboards.source import merge
from gptlab.dashboards.view import Target, build_view, from_json, panel_keys, to_json

MODEL = {"n_layer": 1, "n_head": 2, "n_embd": 16, "block_size": 16, "vocab_size": 64}
NAMES = ["val_continuation", "data/hellaswag_val.jsonl"]
KEYS = [
    "task/val_continuation/acc", "task/val_continuation/acc_norm", "task/val_continuation/bpb",
    "task/hellaswag_val/acc", "task/hellaswag_val/acc_norm", "task/hellaswag_val/bpb",
]  # fmt: skip
SECTION = "Downstream tasks"


def run_dir(root: Path, callbacks: dict[str, Any], **top: Any) -> Path:
    (root / ".hydra").mkdir(parents=True)
    cfg = {"model": MODEL, "callbacks": {"telemetry": {"enabled": False}, **callbacks}, **top}
    (root / ".hydra" / "config.yaml").write_text(yaml.safe_dump(cfg))
    return root


def sweep_view(shape: RunShape) -> Any:
    target = Target(
        entity="e", project="p", name="v", group="g", arm_key="model/tying", arms=["untied", "tied"]
    )
    return from_json(to_json(build_view(shape, target)))  # as saved and loaded back


def test_a_panel_per_task_metric_grouped_by_arm(tmp_path: Path) -> None:
    shape = shape_of(run_dir(tmp_path, {"tasks": {"names": NAMES, "every_n_steps": None, "batch_size": 8}}))
    assert shape.tasks == ("val_continuation", "hellaswag_val")
    assert families(shape)["tasks"] == KEYS
    view = sweep_view(shape)
    names = [s.name for s in view.sections]
    assert names[:3] == ["The question", "Loss", SECTION]
    (section,) = [s for s in view.sections if s.name == SECTION]
    assert [[m.name for m in p.y] for p in section.panels] == [[k] for k in KEYS]  # one key a panel
    assert [p.title for p in section.panels][:3] == [
        "val_continuation: acc (higher is better)", "val_continuation: acc_norm (higher is better)",
        "val_continuation: bpb (lower is better)",
    ]  # fmt: skip
    for p in section.panels:
        assert type(p).__name__ == "LinePlot" and p.x.name == "Step"
        assert (p.groupby.name, p.groupby_aggfunc, p.groupby_rangefunc) == ("arm", "mean", "minmax")
    assert set(KEYS) <= panel_keys(view)


@pytest.mark.parametrize(
    ("callbacks", "top"),
    [
        ({}, {}),  # a run made before the task callback: no block at all
        ({"tasks": {"names": []}}, {}),
        ({"tasks": {"names": None}}, {}),
        ({"tasks": {"names": NAMES, "enabled": False}}, {}),
        ({"tasks": None}, {}),
    ],
)
def test_no_tasks_named_no_section(tmp_path: Path, callbacks: dict, top: dict) -> None:
    shape = shape_of(run_dir(tmp_path, callbacks, **top))
    assert shape.tasks == () and families(shape)["tasks"] == []
    view = sweep_view(shape)
    assert SECTION not in [s.name for s in view.sections]
    assert not {k for k in panel_keys(view) if k.startswith("task/")}


def test_other_spellings_of_the_block(tmp_path: Path) -> None:
    """A comma-separated string (as on a command line) and a root-level `tasks` block are read too."""
    comma = shape_of(
        run_dir(tmp_path / "a", {"tasks": {"names": "val_continuation, data/hellaswag_val.jsonl"}})
    )
    root = shape_of(run_dir(tmp_path / "b", {}, tasks={"names": NAMES}))
    assert comma.tasks == root.tasks == ("val_continuation", "hellaswag_val")


def test_a_sweeps_shape_holds_every_task_and_site_of_its_runs() -> None:
    """The sweep's view is built on the merge of its runs' shapes: names are united, not flattened
    to a flag (a DyT sweep's sites were: families() then iterated over `True`)."""
    base = RunShape(groups=("total",), telemetry=True, act_rms=False, log_steps=True, throughput=False,
                    attention=False, grad_clip=False, z_loss=False)  # fmt: skip
    a = RunShape(**{**base.__dict__, "tasks": ("val_continuation",), "dyt_alpha": ("final_norm",)})
    b = RunShape(**{**base.__dict__, "tasks": ("val_continuation", "hellaswag_val")})
    merged = merge([a, b])
    assert merged.tasks == ("val_continuation", "hellaswag_val") and merged.dyt_alpha == ("final_norm",)
    assert families(merged)["tasks"] == KEYS
    assert families(merged)["dyt_alpha"] == ["dyt_alpha/final_norm"]
