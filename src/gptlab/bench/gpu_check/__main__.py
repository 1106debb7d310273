"""`python -m gptlab.bench.gpu_check [--dry-run] [--out DIR] [--only a,b] [--budget S]`."""

import sys

from gptlab.bench.gpu_check.cli import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
