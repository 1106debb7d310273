"""When a run validates (and so checkpoints) and scores its tasks, in optimizer steps.

Every cadence a user sets is counted in optimizer steps, the unit of `trainer.max_steps`, the LR
schedule and every logged `step`. Lightning counts `val_check_interval` in training batches, which
under `trainer.accumulate_grad_batches=k` are micro-batches: `val_check_interval=120` with k = 2
validated after optimizer step 60. `lightning_val_check_interval` hands Lightning the micro-batch
count that lands on the optimizer step asked for (the step's last micro-batch, after its update).
Telemetry (`trainer.log_every_n_steps`), task scoring and `callbacks.checkpoint_every_n_steps` read
`trainer.global_step`, already optimizer steps.

`auto` (the default of `trainer.val_check_interval` and `callbacks.tasks.every_n_steps`) scales with
the run, so a long GPU run does not validate and checkpoint every 100 steps and a short CPU run does
not pay for task curves it has no room for (docs/performance.md, "Short runs"):

- validation (and checkpoint, at every validation by default): every max(100, ⌈max_steps / 20⌉)
  steps: the default 500-step run validates every 100 steps as before, a 5,000-step run every 250
  (nanoGPT's shakespeare_char cadence), a 600,000-step run 20 times;
- tasks: at the first validation at or after each multiple of max(1000, ⌈max_steps / 10⌉) steps, and
  always at the final validation: a run of at most 1,000 steps scores them once, at its end; a
  100,000-step run ten times;
- telemetry's figures (`callbacks.telemetry.figures_every`, counted in log steps): redrawn during the
  run every max(1000, ⌈max_steps / 10⌉) steps' worth of log steps, and always at the end: a run of at
  most 1,000 steps draws them once, at its end (a 600-step run drew them at step 500 and again at 600);
  a 100,000-step run ten times during it instead of 200 at a fixed 50 log steps.
"""

from __future__ import annotations

import math
from typing import Any

from gptlab.config import AUTO

VAL_FLOOR, VAL_PARTS = 100, 20  # auto validation: every max(100, max_steps / 20) steps
TASK_FLOOR, TASK_PARTS = 1000, 10  # auto tasks: every max(1000, max_steps / 10) steps
FIGURE_FLOOR, FIGURE_PARTS = 1000, 10  # auto figures: every max(1000, max_steps / 10) steps


def val_every(value: Any, max_steps: int) -> int:
    """Optimizer steps between validations: `value`, or auto's max(100, ⌈max_steps / 20⌉)."""
    if value == AUTO:
        return max(VAL_FLOOR, math.ceil(max_steps / VAL_PARTS))
    return int(value)


def task_every(value: Any, max_steps: int) -> int | None:
    """Optimizer steps between task evaluations (None: at every validation): `value`, or auto's
    max(1000, ⌈max_steps / 10⌉)."""
    if value == AUTO:
        return max(TASK_FLOOR, math.ceil(max_steps / TASK_PARTS))
    return None if value is None else int(value)


def figures_every(value: Any, max_steps: int, log_every: int) -> int:
    """Log steps between telemetry's redraws of its figures during a run: `value`, or auto's
    max(1000, ⌈max_steps / 10⌉) optimizer steps in log steps of `log_every` steps (rounded up)."""
    if value == AUTO:
        return math.ceil(max(FIGURE_FLOOR, math.ceil(max_steps / FIGURE_PARTS)) / max(1, log_every))
    return int(value)


def lightning_val_check_interval(value: Any, max_steps: int, accumulate: int) -> int:
    """Lightning's `val_check_interval`, in training batches: the optimizer-step interval times the
    micro-batches of a step, so validation follows the update of step k × interval."""
    return val_every(value, max_steps) * max(1, accumulate)
