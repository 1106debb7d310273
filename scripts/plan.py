"""Plan a run before renting the GPUs: parameters, per-device peak memory of one training step
measured on fake tensors, FLOPs, step time and the time to a token budget, on a named GPU.

usage: python scripts/plan.py [the same overrides as train.py ...] plan.gpu=<name> [plan.<option>=<value> ...]
       python scripts/plan.py --table        (the sizing table of docs/performance.md)

Options:
  plan.gpu        the GPU (required): H200, H200 NVL, H100 SXM (or H100), H100 PCIe, H100 NVL,
                  A100 80GB (or A100), A100 40GB, L40S, RTX 4090, RTX 3090
  plan.tokens     a token budget to time, e.g. 10e9
  plan.mfu        model FLOPs utilisation to assume (default: the cited MFU table)
  plan.headroom   fraction of the GPU's memory kept free (0.1)
  plan.search     true: also find the largest micro-batch that fits
A setup that does not fit is followed by what would (smaller micro-batch with accumulation,
activation checkpointing, more devices), each planned again. See docs/performance.md, Planning.
"""

import sys

from gptlab.planning.cli import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
