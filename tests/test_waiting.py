"""tests/waiting.py: a wait ends when its condition holds, and fails at once (not at a clock) when
the process it waits on has ended without it (issue 37, item 5)."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from tests.waiting import SUITE_LIMIT_S, ended, wait_until


def test_a_wait_on_an_exited_process_fails_at_once_with_its_output() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", "print('bye'); raise SystemExit(3)"], stdout=subprocess.PIPE, text=True
    )
    start = time.monotonic()
    with pytest.raises(AssertionError, match=r"it ended first \(exit 3: bye"):
        wait_until(lambda: False, "a file that never comes", gone=ended(proc))
    assert time.monotonic() - start < 60 < SUITE_LIMIT_S  # the process's end, not the backstop


def test_a_wait_returns_once_the_condition_holds_while_the_process_lives(tmp_path) -> None:  # noqa: ANN001
    flag = tmp_path / "flag"
    code = f"import pathlib, time; time.sleep(0.5); pathlib.Path({str(flag)!r}).touch(); time.sleep(30)"
    proc = subprocess.Popen([sys.executable, "-c", code])
    try:
        wait_until(flag.exists, "the flag", gone=ended(proc))
        assert proc.poll() is None  # returned on the condition, not on the process's end
    finally:
        proc.kill()
        proc.wait()


def test_a_condition_true_as_the_process_ends_is_not_a_failure(tmp_path) -> None:  # noqa: ANN001
    flag = tmp_path / "flag"
    proc = subprocess.Popen([sys.executable, "-c", f"import pathlib; pathlib.Path({str(flag)!r}).touch()"])
    proc.wait()
    seen = iter([False, True])  # false on the first look, true on the look after `gone` fired
    wait_until(lambda: next(seen), "the flag", gone=ended(proc))
