"""Sweep benchmark: an ablation grid serially and with N slots side by side (interleaved rounds).

usage: python scripts/bench_sweep.py [--experiment ablate_tying_quick] [--slots 2] [--rounds 2] [--set k=v]
See docs/performance.md, "Sweeps side by side".
"""

from __future__ import annotations

import sys

if __name__ == "__main__":
    from gptlab.bench.sweep import main

    sys.exit(main(sys.argv[1:]))
