"""scripts/run_lm_eval.py: lm-eval's command line with `--model gptlab` registered.

Kept apart from lm_eval_model so that a machine without lm-eval gets one line saying how to install
it instead of an ImportError traceback. Two things lm-eval's CLI does not do for a model of ours:
  * --output_path: lm-eval names the results' folder after the model (`model_name`), which it finds
    only in model_args keys of its own models (pretrained=, path=, ...); for `ckpt_path=` it draws a
    random name. Here the checkpoint is the model's name, so the folder is the checkpoint's path as
    lm-eval writes a local model's (`/` -> `__`: outputs__demo__checkpoints__last.ckpt).
  * lm-eval's notes that a metric's aggregation or higher_is_better falls back to its default are
    printed at most once each.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator
from typing import Any

from gptlab.errors import USER_ERRORS, exit_with
from gptlab.evaluation.lm_eval_tasks import DefaultNotes, check_bridge_output_types, import_lm_eval


def task_args(argv: list[str]) -> list[str]:
    """The task names of `--tasks a,b` / `-t a` / `--tasks=a`, as lm-eval's CLI splits them."""
    values = [b for a, b in zip(argv, argv[1:], strict=False) if a in ("--tasks", "-t")]
    values += [a.partition("=")[2] for a in argv if a.startswith("--tasks=")]
    return [n.strip() for v in values for n in v.split(",") if n.strip()]


def checkpoint_name(model_args: Any) -> str | None:
    """The checkpoint of `--model_args ckpt_path=...` (a dict, as the CLI passes it, or a string)."""
    if isinstance(model_args, dict) and model_args.get("ckpt_path"):
        return str(model_args["ckpt_path"])
    if isinstance(model_args, str) and "ckpt_path=" in model_args:
        return model_args.split("ckpt_path=", 1)[1].split(",")[0] or None
    return None


@contextlib.contextmanager
def named_after_checkpoint() -> Iterator[None]:
    """lm-eval's tracker names a gptlab model after its checkpoint while the block runs (lm-eval
    0.4.13 has no other way to name a model it does not know)."""
    from lm_eval.loggers.evaluation_tracker import GeneralConfigTracker

    original = GeneralConfigTracker.__dict__["_get_model_name"]

    def name(model_args: Any) -> str | None:
        return checkpoint_name(model_args) or original.__func__(model_args)

    GeneralConfigTracker._get_model_name = staticmethod(name)  # type: ignore[method-assign]
    try:
        yield
    finally:
        GeneralConfigTracker._get_model_name = original  # type: ignore[method-assign]


class Once(logging.Filter):
    """Each of lm-eval's default-aggregation notes at most once."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if DefaultNotes().filter(record):
            return True  # not one of those notes
        if text in self.seen:
            return False
        self.seen.add(text)
        return True


def main(argv: list[str]) -> int:
    """Register gptlab with lm-eval, then run lm-eval's CLI on `argv` (it reads sys.argv)."""
    task_logger, once = logging.getLogger("lm_eval.api.task"), Once()
    try:
        import_lm_eval("scripts/run_lm_eval.py")
        from lm_eval.__main__ import cli_evaluate

        from gptlab.evaluation.lm_eval_model import register

        register()
        check_bridge_output_types(task_args(argv))
        saved, sys.argv = sys.argv, ["lm-eval", *argv]
        task_logger.addFilter(once)
        try:
            with named_after_checkpoint():
                cli_evaluate()
        finally:
            sys.argv = saved
            task_logger.removeFilter(once)
    except USER_ERRORS as err:
        exit_with(err)
    return 0
