"""Training speed: the Lightning path against a bare PyTorch loop, telemetry overhead, data loading.

usage: python scripts/bench.py [model=<preset>] [key=value ...] [bench.<option>=<value> ...]

Hydra overrides compose conf/train.yaml exactly as train.py does (logger=csv unless you give a
logger override). Options:
  bench.steps            timed steps per run (default 10; a multiple of the log interval)
  bench.warmup           untimed steps first (3)
  bench.repeats          rounds, variants interleaved (3)
  bench.variants         comma-separated subset of bare, lightning, lightning+telemetry/10,
                         lightning+telemetry/1 (all)
  bench.loader_batches   batches read from the DataLoader alone (200)
  bench.tokenize         time tokenizing the corpus, cold and cached (true)
  bench.matmul_size      n of the fp32 n×n matmul that measures a CPU's peak (2048)
  bench.matmul_repeats   samples of it per round (5)
  bench.threads          torch threads; 0 = torch's default (0)
  bench.json=<path>      also write the raw results as JSON
See docs/performance.md.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    from gptlab.analysis.bench import compose, format_table, parse_args, run_bench
    from gptlab.errors import USER_ERRORS, exit_with

    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    logging.getLogger("gptlab.analysis.bench").setLevel(logging.INFO)  # one line per run
    json_path = None
    rest = []
    for arg in argv:
        if arg.startswith("bench.json="):
            json_path = Path(arg.partition("=")[2])
        else:
            rest.append(arg)
    try:
        opts, overrides = parse_args(rest)
        cfg = compose(overrides)
        result = run_bench(cfg, opts)
    except USER_ERRORS as err:
        exit_with(err)
    print("command: python scripts/bench.py " + " ".join(argv))
    print(format_table(result))
    if json_path is not None:
        json_path.write_text(json.dumps(result.to_dict(), indent=2, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
