"""Does one LR grid hold across a ladder? Each arm's best LR at every rung of one or more ladder
sweeps (e.g. ladder_ffn under SP and ladder_ffn_mup under μP), its drift in grid steps, the slope of
log best LR on log N, and the verdict (gptlab.analysis.ladder.lr_transfer); --out draws them on one figure.

usage: python scripts/best_lr_vs_n.py <ladder sweep dir> [<ladder sweep dir> ...] [--out FIG.png]
"""

import sys

from gptlab.analysis.ladder.cli import best_lr_main

if __name__ == "__main__":
    sys.exit(best_lr_main(sys.argv[1:], doc=__doc__ or ""))
