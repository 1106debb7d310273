"""Where a short run's seconds go (imports, compose, data, steps, validation, tasks, checkpoints,
figures, sample, wandb), one thread, in a table; projected to a run of --project steps.

usage: python dev/bench_short_run.py [--steps 20] [--shape shakespeare|tiny] [--project 600] [--set k=v]
See docs/performance.md, "Short runs".
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: dev/ is not installed

if __name__ == "__main__":
    from dev.bench.short_run import main

    sys.exit(main(sys.argv[1:]))
