"""Packing benchmark: MB/s and peak RSS for byte and BPE tokenizers, 1 vs 2 processes.

usage: python dev/bench_packing.py [--sizes-mib 2048,512] [--tokenizers byte,bpe] [--procs 1,2]
                                   [--rounds 2] [--work DIR] [--json PATH]
Generates TinyStories-shaped corpora under --work (kept between runs) and packs each with
data.doc_separator in a fresh interpreter. See docs/performance.md, "Packing".
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: dev/ is not installed

if __name__ == "__main__":
    from dev.bench.packing import main

    sys.exit(main(sys.argv[1:]))
