# ruff: noqa: E501  (the documented commands, as long as the docs write them)
"""The Makefile's targets that the docs name and no other test runs: `make test-fast`, `make test`
(two workers), `TEST_WORKERS=0 make test` (serial), `make lint`, `make mutants --list --check`."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.docs.commands.parse import REPO
from tests.docs.commands.run import in_parallel, make, result, run_argv


@pytest.fixture(scope="module")
def make_targets() -> dict[str, object]:
    # one pure test, without the suite's conftest.py files (they import torch: ~2 CPU s in each of the
    # 7 pytest processes here, xdist's workers included); the targets' own flags are what is checked
    self_test = (
        "ARGS=" + str(Path(__file__).parent / "test_table.py") + " -k test_normalise_and_parse_are_robust"
        " --noconftest -p no:cacheprovider"
    )
    jobs: dict[str, Callable[[], object]] = {
        "make": lambda: [
            run_argv(make("test-fast", self_test), REPO),
            run_argv(make("test", self_test), REPO),
            run_argv(make("lint"), REPO),
            run_argv(make("test", "TEST_WORKERS=0", self_test), REPO),
        ],
        "mutants": lambda: run_argv(make("mutants", "ARGS=--list --check"), REPO),
    }  # fmt: skip
    return in_parallel(jobs)


@pytest.mark.slow
def test_make_test_fast_and_lint(make_targets: dict[str, object]) -> None:
    fast, full, lint, serial = result(make_targets, "make")
    assert "1 passed" in fast.ok().stdout and "1 passed" in full.ok().stdout, (fast.stdout, full.stdout)
    lint.ok()
    # make test's two xdist workers, and TEST_WORKERS=0's serial run without them
    assert "bringing up nodes" in full.stdout and "1 passed" in serial.ok().stdout, serial.stdout
    assert "bringing up nodes" not in serial.stdout, serial.stdout


@pytest.mark.slow
def test_make_mutants_list_check(make_targets: dict[str, object]) -> None:
    ran = result(make_targets, "mutants").ok()
    assert re.search(r"(\d+) of \1 mutants apply", ran.stdout), ran.stdout[-1000:]
