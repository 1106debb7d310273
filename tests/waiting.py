"""Waiting in a test on another process: poll what that process writes (its files, the fake SLURM's
job table) and whether it is still alive, never a wall-clock bound shorter than the suite's.

A fresh clone's suite on a machine at load 9-16 failed one fake-SLURM test, "timed out waiting for
4200_1" after 300 s, while the task it waited on was still starting (issue 37, item 5). A wait here
ends when its condition holds, and fails at once, saying why, when the process it waits on has ended
without it. The only clock is a backstop at the suite's own limit: a wait gives up on time only
where CI would have stopped the whole suite anyway.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable

SUITE_LIMIT_S = 90 * 60  # the limit CI gives the whole of .ci/run (lint and suite)


def ended(proc: subprocess.Popen) -> Callable[[], str | None]:
    """`gone` for wait_until: the process's exit and the tail of what it printed, once it has exited."""

    def check() -> str | None:
        if proc.poll() is None:
            return None
        tail = ""
        for stream in (proc.stdout, proc.stderr):
            if stream is not None and not stream.closed:
                text = stream.read()
                tail += text.decode(errors="replace") if isinstance(text, bytes) else text
        return f"exit {proc.returncode}: {tail[-3000:]}"

    return check


def wait_until(
    condition: Callable[[], object],
    what: str,
    gone: Callable[[], str | None],
    poll_s: float = 0.2,
) -> None:
    """Poll `condition` until it is true. `gone` says (a message) when what the test waits on can no
    longer make it true, such as the process having exited: the wait then fails at once with it."""
    end = time.monotonic() + SUITE_LIMIT_S
    while not condition():
        if (why := gone()) is not None:
            if condition():  # it became true as the process ended
                return
            raise AssertionError(f"waiting for {what}, it ended first ({why})")
        if time.monotonic() > end:
            raise AssertionError(
                f"waiting for {what}: still not there at the suite's limit ({SUITE_LIMIT_S} s)"
            )
        time.sleep(poll_s)


def join(ctx, what: str) -> None:  # noqa: ANN001 (torch.multiprocessing's ProcessContext)
    """Wait for spawned processes to end (a failed one raises, through ProcessContext.join), with the
    suite's limit as the only clock."""
    end = time.monotonic() + SUITE_LIMIT_S
    while not ctx.join(timeout=5):
        if time.monotonic() > end:
            for p in ctx.processes:
                p.kill()
            raise AssertionError(f"{what} still running at the suite's limit ({SUITE_LIMIT_S} s)")
