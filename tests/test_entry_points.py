"""Entry points stay thin (issue 37, item 4): a script parses its command line and calls one function
of the package, so its logic is importable, tested and under the import contracts. Six scripts had
grown to 43-88 lines of argument checks, loops and figures before this test.

scripts/ holds what users run; the team's one-off benchmarks are modules of dev/bench, run as
`python -m dev.bench.<name>` (issue 44: one layer, no wrapper files in dev/).
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MAX_LINES = 40  # counted as `wc -l` counts: newline characters
# scripts/ may call the team's tools only here: `make mutants` and docs/development.md run it from scripts/
TEAM_TOOLS_IN_SCRIPTS = {"mutation_check.py"}


def entry_points() -> list[Path]:
    return sorted((REPO / "scripts").glob("*.py")) + [
        REPO / n for n in ("train.py", "evaluate.py", "generate.py")
    ]


def imports_dev(path: Path) -> bool:
    """Whether the file imports the repository's dev package (dev, dev.bench, ...)."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        if any(n == "dev" or n.startswith("dev.") for n in names):
            return True
    return False


def test_the_scripts_are_found() -> None:
    found = {p.name for p in entry_points()}
    assert {"report.py", "dashboard.py", "train.py", "evaluate.py"} <= found and len(found) >= 10


def test_every_entry_point_is_at_most_40_lines() -> None:
    long = {
        p.relative_to(REPO).as_posix(): n
        for p in entry_points()
        if (n := p.read_bytes().count(b"\n")) > MAX_LINES
    }
    assert not long, f"entry points over {MAX_LINES} lines (move their logic into src/gptlab): {long}"


def test_scripts_hold_what_users_run_and_dev_has_one_layer() -> None:
    in_scripts = {
        p.name
        for p in (REPO / "scripts").glob("*.py")
        if imports_dev(p) and p.name not in TEAM_TOOLS_IN_SCRIPTS
    }
    assert not in_scripts, (
        f"scripts/ wrappers of the team's tools (dev/), move them to dev/: {sorted(in_scripts)}"
    )
    wrappers = sorted(
        p.name for p in (REPO / "dev").glob("*.py") if p.name != "__init__.py" and imports_dev(p)
    )
    assert not wrappers, f"dev/*.py wrappers beside dev/bench (run `python -m dev.bench.<name>`): {wrappers}"
    runnable = [p for p in (REPO / "dev" / "bench").glob("*.py") if "def main(" in p.read_text()]
    assert runnable and all('__name__ == "__main__"' in p.read_text() for p in runnable), (
        "a dev/bench module with a main() that `python -m` cannot run"
    )
    assert imports_dev(REPO / "scripts" / "mutation_check.py")  # the check sees a real import
