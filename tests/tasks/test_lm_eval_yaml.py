"""lm-eval task YAMLs read into items: the contexts lm-eval builds, written out by hand here.

The YAML uses what real lm-eval tasks use: jinja templates, a description, one few-shot example
from a train split, a target delimiter, `include:` of a shared base file, and a target given as the
text of a choice. The expected context follows lm-eval's documented layout (description, then each
example as doc_to_text + target_delimiter + target, joined by fewshot_delimiter, then the question).
"""

from __future__ import annotations

import json
from pathlib import Path

from gptlab.evaluation import Item
from gptlab.evaluation.run import load_task

SHOT = {"q": "Is ice cold?", "options": ["yes", "no"], "gold": 0}
DOCS = [
    {"q": "Is fire cold?", "options": ["yes", "no"], "gold": 1},
    {"q": "2 + 2 =", "options": ["three", "four", "five"], "gold": 1},
]
BASE = """dataset_path: json
output_type: multiple_choice
test_split: test
fewshot_split: train
"""
TASK = """include: base.yaml
task: tiny_qa
dataset_kwargs:
  data_files:
    train: {train}
    test: {test}
description: "Answer the question.\\n\\n"
num_fewshot: 1
doc_to_text: "Q: {{{{q}}}}\\nA:"
doc_to_choice: "{{{{options}}}}"
doc_to_target: "{{{{options[gold]}}}}"
target_delimiter: " "
fewshot_delimiter: "\\n\\n"
"""


def write(tmp: Path) -> Path:
    (tmp / "train.jsonl").write_text(json.dumps(SHOT) + "\n")
    (tmp / "test.jsonl").write_text("".join(json.dumps(d) + "\n" for d in DOCS))
    (tmp / "base.yaml").write_text(BASE)
    path = tmp / "tiny_qa.yaml"
    path.write_text(TASK.format(train=tmp / "train.jsonl", test=tmp / "test.jsonl"))
    return path


def test_a_yaml_task_becomes_the_items_lm_eval_builds(tmp_path: Path) -> None:
    items = load_task(str(write(tmp_path)))
    shot = "Answer the question.\n\nQ: Is ice cold?\nA: yes\n\n"
    assert items == [
        Item(shot + "Q: Is fire cold?\nA:", ("yes", "no"), 1, " "),
        Item(shot + "Q: 2 + 2 =\nA:", ("three", "four", "five"), 1, " "),
    ]
    assert items[1].where == f"task={str(tmp_path / 'tiny_qa.yaml')!r} doc 1"


def test_the_yml_suffix_is_read_too(tmp_path: Path) -> None:
    path = write(tmp_path)
    assert len(load_task(str(path.rename(path.with_suffix(".yml"))))) == 2
