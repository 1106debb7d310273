"""Task files read into items: HellaSwag as lm-eval-harness preprocesses it, the plain jsonl as written."""

from __future__ import annotations

import json
from pathlib import Path

from gptlab.evaluation import Item, read_task
from gptlab.evaluation.formats import hellaswag_preprocess

# HellaSwag's first validation row (activitynet), as the hub's jsonl stores it: label a digit string
ROOF = {
    "ind": 24,
    "activity_label": "Roof shingle removal",
    "ctx_a": "A man is sitting on a roof.",
    "ctx_b": "he",
    "ctx": "A man is sitting on a roof. he",
    "split": "val",
    "label": "3",
    "endings": [
        "is using wrap to wrap a pair of skis.",
        "is ripping level tiles off.",
        "is holding a rubik's cube.",
        "starts pulling up roofing on a roof.",
    ],
}


def write(path: Path, *rows: object) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_hellaswag_row_becomes_lm_evals_query_and_choices(tmp_path: Path) -> None:
    [item] = read_task(write(tmp_path / "hs.jsonl", ROOF))
    # lm-eval: preprocess(activity_label + ": " + ctx_a + " " + ctx_b.capitalize()), " " before each ending
    assert item == Item(
        "Roof shingle removal: A man is sitting on a roof. He", tuple(ROOF["endings"]), 3, " "
    )


def test_hellaswag_wikihow_markup_is_cleaned(tmp_path: Path) -> None:
    row = {
        "activity_label": "Food and Entertaining",
        "ctx_a": "[header] How to boil an egg [title] Fill a pot.",
        "ctx_b": "PUT the eggs in",
        "endings": ["gently. [step] Wait ten minutes.", " [substeps] Then  drain."],
        "label": 0,
    }
    [item] = read_task(write(tmp_path / "hs.jsonl", row))
    assert item.context == "Food and Entertaining: How to boil an egg. Fill a pot. Put the eggs in"
    # the second: stripped before [substeps] goes, so its space stays (as in lm-eval)
    assert item.choices == ("gently. Wait ten minutes.", " Then drain.")


def test_hellaswag_preprocess_matches_lm_eval_step_by_step() -> None:
    # strip; " [title]" -> ". "; every [..] removed; each "  " -> " " once (so three spaces leave two)
    assert hellaswag_preprocess("  a [title] b  ") == "a. b"
    assert hellaswag_preprocess("x [step] y") == "x y"
    assert hellaswag_preprocess("x  [step] y") == "x  y"
    assert hellaswag_preprocess("[header] How to") == " How to"


def test_a_row_with_ctx_only_is_read_and_blank_lines_are_skipped(tmp_path: Path) -> None:
    path = tmp_path / "hs.jsonl"
    path.write_text(json.dumps({"ctx": "He runs.", "endings": ["fast", "slow"], "label": 1}) + "\n\n")
    assert read_task(path) == [Item("He runs.", ("fast", "slow"), 1, " ")]


def test_plain_rows_are_taken_verbatim(tmp_path: Path) -> None:
    rows = [
        {"context": "2 + 2 =", "choices": [" 4", " 5", " 22"], "answer": 0},
        {"context": "Capital of France:", "choices": [" Paris", " Lyon"], "answer": 0, "id": "x"},
    ]
    items = read_task(write(tmp_path / "plain.jsonl", *rows))
    assert items == [
        Item("2 + 2 =", (" 4", " 5", " 22"), 0),
        Item("Capital of France:", (" Paris", " Lyon"), 0),
    ]
    assert all(item.delimiter == "" for item in items)
