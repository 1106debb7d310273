"""One-off measurements behind docs/performance.md: packing (dev/bench_packing.py), BPE training
(dev/bench_bpe_train.py), sweeps side by side (dev/bench_sweep.py), activation checkpointing's
memory (dev/checkpoint_memory.py) and compiled blocks against eager (dev/check_compile.py).
The speed benchmark users run, scripts/bench.py, stays in gptlab.bench."""
