"""Task-scoring benchmark: items per second of evaluate.py's multiple-choice scoring on the CPU.

usage: python dev/bench_tasks.py [--presets pre_rmsnorm_swiglu,gpt2] [--batch-sizes 1,8,32]
                                 [--items 16] [--rounds 3] [--json PATH] [model.<field>=<value> ...]
A synthetic 4-choice task of HellaSwag-like lengths, randomly initialised models, one thread, rounds
interleaved. See docs/performance.md, "Task scoring".
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: dev/ is not installed

if __name__ == "__main__":
    from dev.bench.tasks import main

    sys.exit(main(sys.argv[1:]))
