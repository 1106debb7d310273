"""A repo script's `main` called in this process, its output captured as a subprocess run's would be.

scripts/report.py and scripts/dashboard.py are two lines around `main(argv, usage)`: a test of what
they write, not of the command line, calls that `main` with the script's own usage text and saves the
1-2 CPU s of a fresh interpreter (the tests that check the command line itself keep a subprocess)."""

from __future__ import annotations

import ast
import contextlib
import io
import subprocess
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def usage_of(script: str) -> str:
    """The script's docstring, the usage text it passes to `main`."""
    return ast.get_docstring(ast.parse((REPO / script).read_text()), clean=False) or ""


def call_main(script: str, main: Callable[..., int], *args: str) -> subprocess.CompletedProcess:
    """`main([*args], usage=<script's docstring>)` with stdout and stderr captured as text."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([*map(str, args)], usage=usage_of(script))
    return subprocess.CompletedProcess([script, *args], code, out.getvalue(), err.getvalue())
