"""Mutation check: does `make test`'s suite catch deliberate breakages of src/ that matter?

Each mutant below replaces one exact snippet of one file (the snippet must occur exactly once; a stale
one is reported as ERROR). It is applied in a scratch copy of the working tree (the files git lists,
uncommitted ones included), and the suite runs there with this interpreter and PYTHONPATH pointing at
the copy, so the copy's gptlab shadows the editable install. One line per mutant: KILLED (by the first
failing test), SURVIVED, TIMEOUT (counted as killed) or ERROR; exit 1 if any survived or errored.

Slow: a killed mutant usually stops within a minute (oracle tests run first, -x); a survivor runs the
whole suite (tens of minutes on 2 cores). Run it on a tree whose `make test` passes (--baseline
checks that first): a failing baseline would "kill" every mutant. Not part of CI. Examples:
    python scripts/mutation_check.py --list --check
    python scripts/mutation_check.py --only target_shift,causal_mask --fast
    python scripts/mutation_check.py --baseline --jobs 2 --out mutants.txt --logs mutant-logs
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: dev/ is not installed

from dev.mutation_testing.cli import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], repo=Path(__file__).resolve().parents[1], doc=__doc__ or ""))
