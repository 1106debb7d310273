"""The in-loop task evaluation's cost as a share of step time (the default run with and without tasks).

usage: python dev/bench_task_cost.py [--rounds 2] [--threads 1] [--task val_continuation] [--set k=v]
See docs/performance.md, "Tasks in the loop".
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: dev/ is not installed

if __name__ == "__main__":
    from dev.bench.tasks_cost import main

    sys.exit(main(sys.argv[1:]))
