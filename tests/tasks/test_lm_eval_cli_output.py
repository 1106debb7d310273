"""What scripts/run_lm_eval.py and evaluate.py print and write around lm-eval (issue 48, item 3).

* `--output_path`: lm-eval names the results' folder after the model's name, which it reads only from
  its own models' arguments (pretrained=, path=, ...): for `ckpt_path=` it drew a random folder name.
  The folder is now the checkpoint, sanitized as lm-eval sanitizes a local model's path (its own
  `sanitize_model_name`, the oracle here), and the results' `model_name` is the checkpoint.
* lm-eval's notes that a metric's aggregation and higher_is_better fall back to their defaults (two
  lines per metric of a `metric_list`): evaluate.py computes its own metrics and prints none; the
  bridge, where lm-eval aggregates, prints each at most once.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from lm_eval.utils import sanitize_model_name

from tests.interop.helpers import load_cli

EVALUATE = load_cli("evaluate.py")
LM_EVAL = load_cli("scripts/run_lm_eval.py")
ROWS = [
    {"q": "2 + 2 =", "options": [" 3", " 4"], "gold": 1},
    {"q": "1 + 1 =", "options": [" 2", " 5"], "gold": 0},
]
NOTES = ("is defined, but aggregation is not", "is defined, but higher_is_better is not")


def task(d: Path) -> Path:
    (d / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    path = d / "notes.yaml"
    path.write_text(
        f"task: notes\ndataset_path: json\ndataset_kwargs:\n  data_files:\n    test: {d / 'data.jsonl'}\n"
        "test_split: test\noutput_type: multiple_choice\ndoc_to_text: '{{q}}'\ndoc_to_choice: options\n"
        "doc_to_target: gold\nmetric_list:\n  - metric: acc\n  - metric: acc_norm\n"
    )
    return path


def bridge(ckpt: str, yaml: Path, *extra: str) -> list[str]:
    return ["--model", "gptlab", "--model_args", f"ckpt_path={ckpt}", "--tasks", str(yaml), "--device", "cpu",
            *extra]  # fmt: skip


class Records(logging.Handler):
    """The messages lm-eval's task logger hands to its handlers (after the logger's filters)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def notes(lines: list[str]) -> list[str]:
    return [line for line in lines if any(n in line for n in NOTES)]


@pytest.fixture(scope="module")
def ran(byte_ckpt: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """evaluate.py, then the bridge with --output_path, on the task; the checkpoint named by a
    relative path with a folder in it (from the checkpoint's grandparent)."""
    root = tmp_path_factory.mktemp("cli_output")
    yaml = task(root)
    logger, records = logging.getLogger("lm_eval.api.task"), Records()
    logger.addHandler(records)
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.chdir(byte_ckpt.parent.parent)
            ckpt = f"{byte_ckpt.parent.name}/{byte_ckpt.name}"
            assert EVALUATE.main([f"ckpt_path={ckpt}", f"task={yaml}"]) == 0
            in_evaluate, records.lines = records.lines, []
            assert LM_EVAL.main(bridge(ckpt, yaml, "--output_path", str(root / "out"))) == 0
    finally:
        logger.removeHandler(records)
    return {"ckpt": ckpt, "out": root / "out", "evaluate": in_evaluate, "bridge": records.lines}


def test_output_path_is_named_after_the_checkpoint(ran: dict[str, Any]) -> None:
    (folder,) = ran["out"].iterdir()
    assert folder.name == sanitize_model_name(ran["ckpt"]) == ran["ckpt"].replace("/", "__")
    (results,) = folder.glob("results_*.json")
    assert json.loads(results.read_text())["model_name"] == ran["ckpt"]


def test_default_aggregation_notes_none_in_evaluate_at_most_once_in_the_bridge(ran: dict[str, Any]) -> None:
    assert not notes(ran["evaluate"]), ran["evaluate"]
    # lm-eval aggregates in the bridge: its notes stay, once per metric and kind
    assert len(notes(ran["bridge"])) == len(set(notes(ran["bridge"]))) == 2 * 2, ran["bridge"]
