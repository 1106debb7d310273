"""Statistics at initialization on real tokens: residual-stream variance per depth-scaling scheme
against the seeds' prediction, and per-block gradient norms by norm placement (Xiong et al. 2020).

usage: python scripts/init_report.py [model=<preset>] [Hydra overrides ...]
                                     [out=<dir>] [seeds=3] [batch=8]
Default out: outputs/init_report/<preset>. data.max_bytes defaults to 1000000 here.
"""

import sys

from gptlab.heap import imports_unscanned

with imports_unscanned():  # torch's objects: never walked by the collector again
    from gptlab.analysis.init.report import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], usage=__doc__ or ""))
