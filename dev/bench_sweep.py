"""Sweep benchmark: an ablation grid serially and with N slots side by side (interleaved rounds).

usage: python dev/bench_sweep.py [--experiment ablate_tying_quick] [--slots 2] [--rounds 2] [--set k=v]
See docs/performance.md, "Sweeps side by side".
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: dev/ is not installed

if __name__ == "__main__":
    from dev.bench.sweep import main

    sys.exit(main(sys.argv[1:]))
