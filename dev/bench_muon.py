"""Ops, host ms and host reads of one optim=muon step: torch.optim.Muon against BatchedMuon.

usage: python dev/bench_muon.py [--shape gpt2|tiny] [--rounds N]   (see docs/optim.md)
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: dev/ is not installed

from dev.bench.muon_step import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
