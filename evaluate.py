"""Loss, perplexity and bits per byte of a checkpoint on a split of the configured data.

python evaluate.py ckpt_path=outputs/.../checkpoints/last.ckpt [data=<preset>] [data.<field>=...]
    [split=val] [batch_size=<data.batch_size>] [device=cpu]

ckpt_path: a Lightning .ckpt, a consolidated file or an exported HF directory. Scored by the training
run's own validation code: with the run's data overrides, its val/loss (gptlab.evaluation.evaluate).
"""

from __future__ import annotations

import logging
import sys

from gptlab.heap import imports_unscanned

with imports_unscanned():  # torch's and Lightning's objects: never walked by the collector again
    from hydra.errors import HydraException

    from gptlab.errors import USER_ERRORS, exit_with
    from gptlab.evaluation.evaluate import USAGE, evaluate, parse_args, report, split_argv


def main(argv: list[str]) -> int:
    """Parse, evaluate, print; any user error becomes one line on stderr and exit code 2."""
    if any(a in ("-h", "--help", "help") for a in argv):
        print(USAGE)
        return 0
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    try:
        own, overrides = split_argv(argv)
        result = evaluate(cfg := parse_args(own), overrides)
    except (*USER_ERRORS, HydraException) as err:
        exit_with(err)
    print(report(cfg, result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
