"""The team's one-off measurements behind docs/performance.md, each run from the repository root as
`python -m dev.bench.<name>`: packing, bpe_train, sweep (sweeps side by side), checkpoint_memory
(activation checkpointing's memory), compile_parity (compiled blocks against eager), tasks (task
scoring's items/s), tasks_cost (tasks in the training loop)."""
