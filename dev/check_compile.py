"""Check that `compile=true` works for every norm placement × FFN: compiled blocks against eager.

usage: python dev/check_compile.py [placement=pre,post,sandwich,deepnorm] [ffn=swiglu,gelu]

For each combination: a tiny GPT (2 layers, d=32), its blocks compiled by
`gptlab.training.strategies.compile_blocks` (what `configure_model` runs for compile=true), one
forward+backward on the same batch as an eager copy with the same weights. Prints the time of the
compiled step (compilation included) and the largest loss and relative gradient differences; exits 1
if any combination fails or differs by more than 1e-4. Slow on a CPU (inductor builds C++ with gcc).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: dev/ is not installed

from dev.bench.compile_parity import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
