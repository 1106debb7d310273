"""μP's coordinate check: activation RMS against width after a few Adam steps, SP beside μP.

usage: python scripts/coord_check.py [--widths 64,128,256,512,1024] [--base 64] [--steps 4]
                                     [--lr 0.01] [--seeds 2] [--layers 2] [--heads 4] [--out DIR]
Prints each probe's slope of log2 RMS on log2 width (0: flat, 1: ∝ width) and writes
DIR/coord_check.png and DIR/coord_check.json (default DIR: outputs/coord_check). Bad input: one line,
exit 2.
"""

import sys

from gptlab.heap import imports_unscanned

with imports_unscanned():  # torch's objects: never walked by the collector again
    from gptlab.analysis.coord_check_cli import width_main

if __name__ == "__main__":
    sys.exit(width_main(sys.argv[1:], usage=__doc__ or ""))
