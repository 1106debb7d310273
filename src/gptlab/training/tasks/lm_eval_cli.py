"""scripts/run_lm_eval.py: lm-eval's command line with `--model gptlab` registered.

Kept apart from lm_eval_model so that a machine without lm-eval gets one line saying how to install
it instead of an ImportError traceback.
"""

from __future__ import annotations

import sys

from gptlab.errors import USER_ERRORS, exit_with
from gptlab.training.tasks.lm_eval_tasks import import_lm_eval


def main(argv: list[str]) -> int:
    """Register gptlab with lm-eval, then run lm-eval's CLI on `argv` (it reads sys.argv)."""
    try:
        import_lm_eval("scripts/run_lm_eval.py")
        from lm_eval.__main__ import cli_evaluate

        from gptlab.training.tasks.lm_eval_model import register

        register()
        saved, sys.argv = sys.argv, ["lm-eval", *argv]
        try:
            cli_evaluate()
        finally:
            sys.argv = saved
    except USER_ERRORS as err:
        exit_with(err)
    return 0
