"""Running one mutant: a scratch copy of the working tree with the mutant applied, and the suite run
there with PYTHONPATH pointing at the copy, so the copy's gptlab shadows the editable install."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from dev.mutation_testing.mutants import BASELINE, Mutant

# `make test`'s suite. pytest (9.x) merges `tests/oracle tests` into tests/ order, so the oracle
# tests are put first by naming tests/'s other entries explicitly: the same set, oracles first.
SUITE = ["-m", "pytest", "-q", "-x", "-p", "no:cacheprovider"]
FAST = ["-m", "not slow and not multiproc"]

Result = tuple[str, str, float]  # status, detail, seconds


def tree_files(repo: Path) -> list[str]:
    """The working tree as git sees it: tracked and untracked-not-ignored files that exist."""
    cmd = ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"]
    out = subprocess.run(cmd, cwd=repo, capture_output=True, check=True).stdout.decode()
    return [f for f in out.split("\0") if f and (repo / f).is_file()]


def mutate(source: str, m: Mutant) -> str:
    """The mutated text; ValueError when `old` does not occur exactly once or the result won't parse."""
    if (n := source.count(m.old)) != 1:
        raise ValueError(f"`old` occurs {n} times in src/gptlab/{m.file}")
    new = source.replace(m.old, m.new)
    compile(new, m.file, "exec")  # SyntaxError is a ValueError
    return new


def check(m: Mutant, repo: Path) -> str | None:
    """None if the mutant applies to the current tree, else why not."""
    try:
        mutate((repo / "src/gptlab" / m.file).read_text(), m)
    except (OSError, ValueError) as e:
        return str(e)
    return None


def test_paths(tree: Path) -> list[str]:
    """tests/oracle, then every other directory or test file of tests/, sorted."""
    rest = [p for p in sorted((tree / "tests").iterdir()) if p.name not in ("oracle", "__pycache__")]
    rest = [p for p in rest if (p.is_dir() and not p.name.startswith(".")) or p.name.startswith("test_")]
    return ["tests/oracle", *(str(p.relative_to(tree)) for p in rest)]


def pytest(
    tree: Path, basetemp: Path, fast: bool, timeout: float, tests: Sequence[str] = ()
) -> tuple[int | None, str]:
    """(exit code or None on timeout, output) of the suite in `tree` (or only `tests`, pytest ids
    relative to the repo), its gptlab shadowing the install."""
    env = {**os.environ, "PYTHONPATH": f"{tree / 'src'}{os.pathsep}{tree}"}
    paths = list(tests) or test_paths(tree)
    cmd = [sys.executable, *SUITE, *(FAST if fast else []), f"--basetemp={basetemp}", *paths]
    proc = subprocess.Popen(cmd, cwd=tree, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)  # fmt: skip
    try:
        output = proc.communicate(timeout=timeout)[0]
        return proc.returncode, output
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the suite's whole process group, train.py runs included
        return None, proc.communicate()[0]


def run_one(
    m: Mutant,
    repo: Path,
    files: list[str],
    fast: bool,
    timeout: float,
    logs: Path | None,
    tests: Sequence[str] = (),
) -> Result:
    """(status, detail, seconds) of one mutant, in its own scratch copy (deleted afterwards)."""
    start = time.monotonic()
    root = Path(tempfile.mkdtemp(prefix=f"gptlab-mutant-{m.name}-"))
    try:
        tree = root / "tree"
        for f in files:
            (tree / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(repo / f, tree / f)
        target = tree / "src/gptlab" / m.file
        try:
            if m is not BASELINE:
                target.write_text(mutate(target.read_text(), m))
        except (OSError, ValueError) as e:
            return "ERROR", f"did not apply: {e}", time.monotonic() - start
        code, output = pytest(tree, root / "pytest", fast, timeout, tests)
        if logs:
            (logs / f"{m.name}.log").write_text(output)
        took = time.monotonic() - start
        if code is None:
            return "TIMEOUT", f"after {timeout:.0f} s (counted as killed)", took
        if code == 0:
            return "SURVIVED", m.why, took
        if code in (1, 2):  # tests failed / collection interrupted
            hit = re.search(r"^(?:FAILED|ERROR) (\S+)", output, re.MULTILINE)
            return "KILLED", f"by {hit.group(1) if hit else '(no test id in the output)'}", took
        return "ERROR", f"pytest exited {code}: " + " | ".join(output.strip().splitlines()[-3:]), took
    finally:
        shutil.rmtree(root, ignore_errors=True)
