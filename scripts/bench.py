"""Training speed: the Lightning path against a bare PyTorch loop, telemetry overhead, data loading.

usage: python scripts/bench.py [model=<preset>] [key=value ...] [bench.<option>=<value> ...]

Hydra overrides compose conf/train.yaml exactly as train.py does (logger=csv unless you give a
logger override). Options (the schema: gptlab.config.BenchOptions):
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

import sys

from gptlab.bench.cli import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
