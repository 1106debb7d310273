"""BPE training benchmark: tokenizers' trainer against rustbpe on the same sample and vocabulary.

usage: python dev/bench_bpe_train.py [--sample-mib 100] [--vocab-size 4096] [--rounds 2]
                                         [--trainers tokenizers,rustbpe] [--work DIR] [--json PATH]
                                         [--corpus generated|python-sources|long-runs] [--budget-mib 12,all]
                                         [--max-piece-chars 256,none] [--runs 6] [--run-chars 100000]
Generates a TinyStories-shaped corpus under --work (kept between runs) and trains each BPE in a fresh
interpreter. See docs/performance.md, "BPE training".
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: dev/ is not installed

if __name__ == "__main__":
    from dev.bench.bpe_train import main

    sys.exit(main(sys.argv[1:]))
