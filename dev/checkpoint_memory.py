"""Activation memory of one training step with model.activation_checkpointing=none, selective, full.

usage: python dev/checkpoint_memory.py [--rounds N] [model=<preset>] [key=value ...]

--rounds N also times one step per mode (N interleaved rounds) against the planner's recompute factor.

The overrides compose conf/train.yaml as train.py does; the model and data.batch_size are measured
on real CPU tensors with torch's MemTracker (dev.bench.checkpoint_memory). See docs/performance.md.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: dev/ is not installed

from dev.bench.checkpoint_memory import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
