"""scripts/run_lm_eval.py: lm-eval's command line with `--model gptlab` registered.

Kept apart from lm_eval_model so that a machine without lm-eval gets one line saying how to install
it instead of an ImportError traceback.
"""

from __future__ import annotations

import sys

from gptlab.errors import USER_ERRORS, exit_with
from gptlab.training.tasks.lm_eval_tasks import check_bridge_output_types, import_lm_eval


def task_args(argv: list[str]) -> list[str]:
    """The task names of `--tasks a,b` / `-t a` / `--tasks=a`, as lm-eval's CLI splits them."""
    values = [b for a, b in zip(argv, argv[1:], strict=False) if a in ("--tasks", "-t")]
    values += [a.partition("=")[2] for a in argv if a.startswith("--tasks=")]
    return [n.strip() for v in values for n in v.split(",") if n.strip()]


def main(argv: list[str]) -> int:
    """Register gptlab with lm-eval, then run lm-eval's CLI on `argv` (it reads sys.argv)."""
    try:
        import_lm_eval("scripts/run_lm_eval.py")
        from lm_eval.__main__ import cli_evaluate

        from gptlab.training.tasks.lm_eval_model import register

        register()
        check_bridge_output_types(task_args(argv))
        saved, sys.argv = sys.argv, ["lm-eval", *argv]
        try:
            cli_evaluate()
        finally:
            sys.argv = saved
    except USER_ERRORS as err:
        exit_with(err)
    return 0
