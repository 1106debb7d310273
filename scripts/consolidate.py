"""Turn a distributed (FSDP) checkpoint directory into one file that generate.py and export read.

usage: python scripts/consolidate.py <run>/checkpoints/last.ckpt <out file>

Reads the model weights only, in one process, and writes {"model_config", "state_dict" (GPT names),
"tokenizer"}: see gptlab.checkpoints.distributed.
"""

from __future__ import annotations

import sys

from gptlab.heap import imports_unscanned

with imports_unscanned():  # torch's objects: never walked by the collector again
    from gptlab.checkpoints import consolidate
    from gptlab.errors import USER_ERRORS, exit_with

USAGE = "usage: python scripts/consolidate.py <distributed checkpoint dir> <out file>"


def main(argv: list[str]) -> int:
    """Consolidate; bad input becomes one line on stderr and exit code 2."""
    if len(argv) != 2 or argv[0] in ("-h", "--help"):
        print(USAGE, file=sys.stderr)
        return 2
    try:
        out = consolidate(argv[0], argv[1])
    except USER_ERRORS as err:
        exit_with(err)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
