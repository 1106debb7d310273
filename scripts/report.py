"""Write report.md (tables, CIs, verdicts, PNG figures) for a sweep directory; no network needed.

usage: python scripts/report.py <sweep dir> [out=<dir>] [figures=false] [wandb=true] [baseline=<arm>]
       [lr_sensitivity=init|wortsman] [seeds=<s1,s2,...>]
(wandb=true also logs the figures to the sweep's summary run, offline unless logger.mode=online;
baseline=<arm> compares every arm with that one instead of the sweep's baseline;
lr_sensitivity=wortsman counts a diverged run at min(final loss, loss at init), the paper's
definition, instead of the default's loss at init; seeds=1,2 judges the sweep on those planned seeds
alone, e.g. one stopped before its last seed)
"""

import sys

from gptlab.analysis.sweep_summary import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], usage=__doc__ or ""))
