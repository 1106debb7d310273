"""docs/bad-inputs.md, "Task files": each bad task input is one stderr line, exit 2, nothing written.

In-process through evaluate.py's main (the same exit_with the CLI uses); one case also as a
subprocess for the real exit code and stderr.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.interop.helpers import REPO, load_cli

EVALUATE = load_cli("evaluate.py")
OK = {"context": "2 + 2 =", "choices": [" 4", " 5"], "answer": 0}
ACCEPTED = (
    r"accepted: jsonl lines of HellaSwag \(\{\"ctx_a\", \"ctx_b\" or \"ctx\", \"endings\", \"label\"\}\) or "
    r"\{\"context\": str, \"choices\": \[str, \.\.\.\], \"answer\": int\}"
)


def lines(*rows: object) -> str:
    return "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows)


FILES = {
    "malformed.jsonl": lines(OK, '{"context": "x", "choices": [" a", " b"], "answer": 0', OK),
    "keys.jsonl": lines({"question": "x", "options": ["a", "b"], "gold": 0}),
    "range.jsonl": lines(OK, OK, {**OK, "answer": 2}),
    "hs_range.jsonl": lines({"ctx": "He runs.", "endings": ["fast", "slow", "far", "home"], "label": "4"}),
    "notint.jsonl": lines({**OK, "answer": "B"}),
    "empty_choice.jsonl": lines({**OK, "choices": [" 4", ""]}),
    "hs_empty.jsonl": lines({"ctx": "He runs.", "endings": ["fast", " [step] "], "label": 0}),
    "one_choice.jsonl": lines({**OK, "choices": [" 4"]}),
    "empty.jsonl": "\n",
}
# (row, task= value ({d}: the bad files' dir), the whole stderr line as a regex)
ROWS = [
    ("missing file", "{d}/missing.jsonl", r"error: task='{d}/missing.jsonl' does not exist; " + ACCEPTED),
    ("a directory", "{d}", r"error: task='{d}' is a directory; " + ACCEPTED),
    (
        "not UTF-8",
        "{d}/latin1.jsonl",
        r"error: task='{d}/latin1.jsonl' is not UTF-8 \(byte 15\); " + ACCEPTED,
    ),
    (
        "malformed line",
        "{d}/malformed.jsonl",
        r"error: task='{d}/malformed.jsonl' line 2 is not JSON \(Expecting ',' delimiter\); " + ACCEPTED,
    ),
    (
        "unknown keys",
        "{d}/keys.jsonl",
        r"error: task='{d}/keys.jsonl' line 1 has keys \['gold', 'options', 'question'\]; " + ACCEPTED,
    ),
    (
        "answer out of range",
        "{d}/range.jsonl",
        r"error: task='{d}/range.jsonl' line 3: answer=2 is out of range; accepted: 0\.\.1",
    ),
    (
        "HellaSwag label out of range",
        "{d}/hs_range.jsonl",
        r"error: task='{d}/hs_range.jsonl' line 1: label=4 is out of range; accepted: 0\.\.3",
    ),
    (
        "answer not an integer",
        "{d}/notint.jsonl",
        r"error: task='{d}/notint.jsonl' line 1: answer='B' is not an integer; accepted: 0\.\.1",
    ),
    (
        "empty choice",
        "{d}/empty_choice.jsonl",
        r"error: task='{d}/empty_choice.jsonl' line 1: choice 1 is empty; accepted: non-empty choices",
    ),
    (
        "ending empty after clean-up",
        "{d}/hs_empty.jsonl",
        r"error: task='{d}/hs_empty.jsonl' line 1: choice 1 is empty after HellaSwag's clean-up; "
        r"accepted: non-empty choices",
    ),
    (
        "one choice",
        "{d}/one_choice.jsonl",
        r"error: task='{d}/one_choice.jsonl' line 1: choices=\[' 4'\] is not accepted; "
        r"accepted: a list of 2 or more strings",
    ),
    ("no items", "{d}/empty.jsonl", r"error: task='{d}/empty.jsonl' holds no items; " + ACCEPTED),
    (
        "unknown task name",
        "hellaswag",
        r"error: task='hellaswag' is neither a task file nor a known task; accepted: a \.jsonl file path "
        r"\(HellaSwag or \{context, choices, answer\}\), an lm-eval task \.yaml "
        r"\(multiple_choice; docs/evaluation\.md\) or a built-in task: val_continuation",
    ),
    (
        "empty task=",
        ",",
        r"error: task= is empty; accepted: a built-in task \(val_continuation\), a \.jsonl or lm-eval "
        r"\.yaml task file path, or several separated by commas \(docs/evaluation\.md\)",
    ),
]


@pytest.fixture(scope="module")
def bad(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("bad")
    for name, text in FILES.items():
        (d / name).write_text(text)
    (d / "latin1.jsonl").write_bytes(
        json.dumps({**OK, "context": "Grüße"}, ensure_ascii=False).encode("latin-1")
    )
    return d


def tree(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


@pytest.mark.parametrize(("row", "task", "want"), ROWS, ids=[r[0] for r in ROWS])
def test_bad_task_input_is_one_line_exit_2_nothing_written(
    row: str, task: str, want: str, bad: Path, byte_ckpt: Path, tmp_path: Path, capsys, monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)
    before = tree(bad), tree(byte_ckpt.parent)
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_:
        EVALUATE.main([f"ckpt_path={byte_ckpt}", f"task={task.replace('{d}', str(bad))}"])
    assert exit_.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and re.fullmatch(want.replace("{d}", re.escape(str(bad))), err[0]), err
    assert (tree(bad), tree(byte_ckpt.parent)) == before and tree(tmp_path) == []


def test_unreadable_file_is_one_line(tmp_path: Path, byte_ckpt: Path, capsys, monkeypatch) -> None:
    """Permission denied (simulated: the tests run as root, who reads any file)."""
    path = tmp_path / "locked.jsonl"
    path.write_text(lines(OK))

    def denied(self: Path, *args: object, **kwargs: object) -> str:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, "read_text", denied)
    with pytest.raises(SystemExit) as exit_:
        EVALUATE.main([f"ckpt_path={byte_ckpt}", f"task={path}"])
    assert exit_.value.code == 2
    assert capsys.readouterr().err.startswith(f"error: task='{path}' cannot be read (Permission denied); ")


def test_a_data_override_with_task_is_refused(byte_ckpt: Path, bad: Path, capsys) -> None:
    with pytest.raises(SystemExit):
        EVALUATE.main([f"ckpt_path={byte_ckpt}", f"task={bad}/range.jsonl", "data.max_bytes=100"])
    assert capsys.readouterr().err.strip() == (
        "error: 'data.max_bytes=100' does not apply with task= files (they hold their own text); "
        "accepted with task=: ckpt_path, batch_size, device, and data.* with a built-in task "
        "(val_continuation)"
    )


def test_the_real_command_line(bad: Path, byte_ckpt: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(REPO / "evaluate.py"), f"ckpt_path={byte_ckpt}", f"task={bad}/malformed.jsonl"],
        capture_output=True, text=True, cwd=REPO, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()]
    assert proc.stderr.startswith(f"error: task='{bad}/malformed.jsonl' line 2 is not JSON")
