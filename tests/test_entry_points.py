"""Entry points stay thin (issue 37, item 4): a script parses its command line and calls one function
of the package, so its logic is importable, tested and under the import contracts. Six scripts had
grown to 43-88 lines of argument checks, loops and figures before this test.
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MAX_LINES = 40  # counted as `wc -l` counts: newline characters


def entry_points() -> list[Path]:
    return sorted((REPO / "scripts").glob("*.py")) + [
        REPO / n for n in ("train.py", "evaluate.py", "generate.py")
    ]


def test_the_scripts_are_found() -> None:
    found = {p.name for p in entry_points()}
    assert {"report.py", "dashboard.py", "train.py"} <= found and len(found) >= 10


def test_every_entry_point_is_at_most_40_lines() -> None:
    long = {
        p.relative_to(REPO).as_posix(): n
        for p in entry_points()
        if (n := p.read_bytes().count(b"\n")) > MAX_LINES
    }
    assert not long, f"entry points over {MAX_LINES} lines (move their logic into src/gptlab): {long}"
