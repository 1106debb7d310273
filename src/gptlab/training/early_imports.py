"""What a run imports before Lightning does, because it costs less there.

`wandb.init` imports `wandb.sdk.launch` (to apply staged launch inputs) on every run. Its pydantic
models read their fields' docstrings through `inspect.getmodule` on each frame of the importing
stack, and for importlib's own frames that walks every module in `sys.modules`: after torch and
Lightning (~4,300 modules) the import costs ~1.7 CPU s, before Lightning (~1,350, torch among them)
~0.7 s (docs/performance.md, "Short runs"). Importing it early changes nothing wandb records.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

# the module wandb_run._detect_and_apply_job_inputs imports (wandb 0.19 to 0.31)
WANDB_LAUNCH_INPUTS = "wandb.sdk.launch.inputs.internal"


def import_before_lightning(cfg: Any) -> None:
    """Import wandb's launch models now if the run will start wandb (logger.wandb, not disabled)."""
    logger = cfg.logger
    if not logger.wandb or logger.mode == "disabled" or "lightning" in sys.modules:
        return
    try:
        importlib.import_module(WANDB_LAUNCH_INPUTS)
    except ImportError:  # another wandb layout: wandb.init imports what it needs itself
        return
