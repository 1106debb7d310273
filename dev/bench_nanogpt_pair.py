"""gptlab against nanoGPT on nanoGPT's shakespeare_char config, interleaved, one thread each: CPU
seconds medians and their ratio.

usage: python dev/bench_nanogpt_pair.py --nanogpt /tmp/nanogpt [--steps 600] [--rounds 3] [--set k=v]
See docs/performance.md, "Short runs".
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: dev/ is not installed

if __name__ == "__main__":
    from dev.bench.nanogpt_pair import main

    sys.exit(main(sys.argv[1:]))
