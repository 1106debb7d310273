"""CompleteP's coordinate check in depth: the residual stream's change after a few Adam steps against
depth, μP (no depth rule) beside CompleteP (Dey et al. 2025; gptlab.analysis.coord_check.depth_check).

usage: python scripts/depth_check.py [--depths 2,4,8,16] [--width 64] [--steps 3] [--lr 0.01]
                                     [--seeds 2] [--out DIR]
The smallest depth is CompleteP's base. Prints each size's slope of log2 RMS on log2 depth (0: flat,
1: ∝ depth) and writes DIR/depth_check.png and DIR/depth_check.json (default DIR:
outputs/depth_check). Bad input: one line, exit 2.
"""

import sys

from gptlab.heap import imports_unscanned

with imports_unscanned():  # torch's objects: never walked by the collector again
    from gptlab.analysis.coord_check_cli import depth_main

if __name__ == "__main__":
    sys.exit(depth_main(sys.argv[1:], usage=__doc__ or ""))
