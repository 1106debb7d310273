"""lm-eval-harness with gptlab registered as a model (lm-eval 0.4.13 has no plugin entry points;
not named lm_eval.py, which would shadow the lm_eval package when run as a script).

python scripts/run_lm_eval.py --model gptlab --model_args ckpt_path=<.ckpt | consolidated | HF dir>
    --tasks <lm-eval task name or local task .yaml> [--device cpu] [--batch_size 16] [lm-eval options]

Every argument goes to lm-eval's own command line (`lm_eval --help`); docs/evaluation.md says more.
Needs the eval extra: pip install 'gptlab[eval]'.
"""

from __future__ import annotations

import sys

from gptlab.heap import imports_unscanned

with imports_unscanned():  # torch's objects: never walked by the collector again
    from gptlab.evaluation.lm_eval_cli import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
