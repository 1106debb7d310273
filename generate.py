"""Sample from a trained model, streaming to stdout.

python generate.py ckpt_path=outputs/.../checkpoints/last.ckpt prompt='def ' max_new_tokens=200 \
    temperature=0.8 top_k=50 [top_p=0.95] [seed=0] [device=cpu]
ckpt_path may be a Lightning checkpoint, a consolidated FSDP checkpoint or an exported HF directory.
Without prompt=, the sample starts from the first tokens of a validation document of the run that
wrote the checkpoint (a newline for an exported directory).
"""

from __future__ import annotations

import sys

from gptlab.heap import imports_unscanned

with imports_unscanned():  # torch's objects: never walked by the collector again
    from gptlab.errors import USER_ERRORS, exit_with
    from gptlab.generation import generate, parse_args


def main(argv: list[str]) -> int:
    """Parse, sample, stream; bad input becomes one line on stderr and exit code 2."""
    try:
        generate(parse_args(argv), sys.stdout)
    except USER_ERRORS as err:
        exit_with(err)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
