"""Plot a `-m optim.lr=... model/qk_norm=off,on` sweep: max attention logit over blocks and train loss
against step, and print the table of docs/ablations.md (section 7).

usage: python scripts/plot_qk_norm_sweep.py <hydra.sweep.dir> <out.png>
"""

import sys
from pathlib import Path

from gptlab.heap import imports_unscanned

with imports_unscanned():  # torch's objects: never walked by the collector again
    from gptlab.analysis.qk_norm_sweep import main
    from gptlab.errors import USER_ERRORS, exit_with

if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__.strip().splitlines()[-1])
    try:
        print(main(Path(sys.argv[1]), Path(sys.argv[2])))
    except USER_ERRORS as err:
        exit_with(err)
