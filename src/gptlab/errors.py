"""User-facing errors: one line, the field, the bad value and what is accepted; exit code 2."""

from __future__ import annotations

import logging
import sys

from omegaconf.errors import OmegaConfBaseException

from gptlab.checkpoints.safe_load import CheckpointError

USER_ERRORS = (
    ValueError,
    FileNotFoundError,
    ConnectionError,
    CheckpointError,
    OmegaConfBaseException,
)
EXIT_USAGE = 2


def one_line(err: BaseException) -> str:
    text = " ".join(str(err).split()) or type(err).__name__
    return f"error: {text}"


def exit_with(err: BaseException, code: int = EXIT_USAGE) -> None:
    """Print the error as one line on stderr and exit with `code` (2: the input was wrong)."""
    logging.getLogger("gptlab").debug("user error", exc_info=err)
    print(one_line(err), file=sys.stderr, flush=True)
    sys.exit(code)
