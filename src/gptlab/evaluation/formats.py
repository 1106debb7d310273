"""Task files read into items: a context, its choices, the index of the right one.

Two jsonl formats, told apart by each line's keys:
  * HellaSwag (`endings`, `label`, and `ctx_a`+`ctx_b` or `ctx`, optionally `activity_label`),
    preprocessed as lm-eval-harness defines it (lm_eval/tasks/hellaswag/utils.py: `preprocess` and
    `process_docs`); the implementation here is our own.
  * plain: {"context": str, "choices": [str, ...], "answer": int}, scored verbatim (no space added).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

PLAIN_KEYS = ("context", "choices", "answer")
HELLASWAG_KEYS = ("endings", "label")
ACCEPTED = (
    'accepted: jsonl lines of HellaSwag ({"ctx_a", "ctx_b" or "ctx", "endings", "label"}) or '
    '{"context": str, "choices": [str, ...], "answer": int}'
)


@dataclass(frozen=True)
class Item:
    """One question: each continuation scored is `delimiter + choice` after `context`."""

    context: str
    choices: tuple[str, ...]
    label: int
    delimiter: str = ""
    where: str = field(default="", compare=False)  # "task='f.jsonl' line 3", for errors found later


def hellaswag_preprocess(text: str) -> str:
    """HellaSwag's clean-up: strip, ' [title]' -> '. ', drop [bracketed] WikiHow markup, '  ' -> ' '."""
    text = text.strip().replace(" [title]", ". ")
    text = re.sub(r"\[.*?\]", "", text)
    return text.replace("  ", " ")


def _label(value: Any, n_choices: int, field: str, where: str) -> int:
    """An int index into the choices (HellaSwag's hub copy stores it as a digit string)."""
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{where}: {field}={value!r} is not an integer; accepted: 0..{n_choices - 1}")
    if not 0 <= value < n_choices:
        raise ValueError(f"{where}: {field}={value} is out of range; accepted: 0..{n_choices - 1}")
    return int(value)


def _strings(value: Any, field: str, where: str) -> tuple[str, ...]:
    """At least two non-empty strings."""
    if not isinstance(value, list) or len(value) < 2 or not all(isinstance(v, str) for v in value):
        raise ValueError(
            f"{where}: {field}={repr(value)[:80]} is not accepted; accepted: a list of 2 or more strings"
        )
    return tuple(value)


def _text(row: dict[str, Any], field: str, where: str) -> str:
    value = row.get(field)
    if not isinstance(value, str):
        raise ValueError(f"{where}: {field} must be a string (found {type(value).__name__})")
    return value


def hellaswag_item(row: dict[str, Any], where: str) -> Item:
    """lm-eval's HellaSwag doc: query = activity_label + ': ' + ctx_a + ' ' + ctx_b.capitalize()."""
    if "ctx_a" in row or "ctx_b" in row:
        ctx = _text(row, "ctx_a", where) + " " + _text(row, "ctx_b", where).capitalize()
    else:
        ctx = _text(row, "ctx", where)
    if "activity_label" in row:
        ctx = _text(row, "activity_label", where) + ": " + ctx
    endings = _strings(row.get("endings"), "endings", where)
    choices = tuple(hellaswag_preprocess(e) for e in endings)
    return Item(hellaswag_preprocess(ctx), choices, _label(row["label"], len(choices), "label", where), " ")


def plain_item(row: dict[str, Any], where: str) -> Item:
    """{"context", "choices", "answer"}, taken as written."""
    choices = _strings(row.get("choices"), "choices", where)
    return Item(_text(row, "context", where), choices, _label(row["answer"], len(choices), "answer", where))


def parse_line(line: str, where: str) -> Item:
    """One jsonl line as an item, its format told by its keys."""
    try:
        row = json.loads(line)
    except json.JSONDecodeError as e:
        raise ValueError(f"{where} is not JSON ({e.msg}); {ACCEPTED}") from None
    if not isinstance(row, dict):
        raise ValueError(f"{where} is a JSON {type(row).__name__}, not an object; {ACCEPTED}")
    if all(k in row for k in HELLASWAG_KEYS):
        item = hellaswag_item(row, where)
    elif all(k in row for k in PLAIN_KEYS):
        item = plain_item(row, where)
    else:
        raise ValueError(f"{where} has keys {sorted(row)[:8]}; {ACCEPTED}")
    return checked(item, where, " after HellaSwag's clean-up" if item.delimiter else "")


def checked(item: Item, where: str, after: str = "") -> Item:
    """The item, located at `where`, once its choices are non-empty. An empty context is scored
    as lm-eval scores it, after the end-of-text token (scoring.encode_request)."""
    empty = [i for i, c in enumerate(item.choices) if not c]
    if empty:
        raise ValueError(f"{where}: choice {empty[0]} is empty{after}; accepted: non-empty choices")
    return replace(item, where=where)


def read_task(path: str | Path) -> list[Item]:
    """Every item of a jsonl task file (blank lines skipped); errors name the file and line."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"task={str(path)!r} is a directory; {ACCEPTED}")
    if not path.is_file():
        raise FileNotFoundError(f"task={str(path)!r} does not exist; {ACCEPTED}")
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ValueError(f"task={str(path)!r} cannot be read ({e.strerror}); {ACCEPTED}") from None
    except UnicodeDecodeError as e:
        raise ValueError(f"task={str(path)!r} is not UTF-8 (byte {e.start}); {ACCEPTED}") from None
    items = [
        parse_line(line, f"task={str(path)!r} line {n}")
        for n, line in enumerate(text.splitlines(), start=1)
        if line.strip()
    ]
    if not items:
        raise ValueError(f"task={str(path)!r} holds no items; {ACCEPTED}")
    return items
