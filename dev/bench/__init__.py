"""One-off measurements behind docs/performance.md: packing (scripts/bench_packing.py), BPE training
(scripts/bench_bpe_train.py), sweeps side by side (scripts/bench_sweep.py), activation checkpointing's
memory (scripts/checkpoint_memory.py) and compiled blocks against eager (scripts/check_compile.py).
The speed benchmark users run, scripts/bench.py, stays in gptlab.bench."""
