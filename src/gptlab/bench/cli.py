"""scripts/bench.py's work: read the options, compose the config, run, print the table."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path


def main(argv: Sequence[str]) -> int:
    """Run the benchmark the arguments describe; a bad option or config exits 2 in one line."""
    from gptlab.bench.options import compose, parse_args
    from gptlab.bench.run import run_bench
    from gptlab.bench.table import format_table
    from gptlab.errors import USER_ERRORS, exit_with

    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    logging.getLogger("gptlab.bench").setLevel(logging.INFO)  # one line per run
    try:
        opts, overrides = parse_args(argv)
        cfg = compose(overrides)
        result = run_bench(cfg, opts)
    except USER_ERRORS as err:
        exit_with(err)
    print("command: python scripts/bench.py " + " ".join(argv))
    print(format_table(result))
    if opts.json is not None:
        Path(opts.json).write_text(json.dumps(result.to_dict(), indent=2, default=str) + "\n")
    return 0
