"""Plan a run before renting the GPUs: parameters, per-device memory measured on fake tensors,
FLOPs and step time, for any preset and world size (scripts/plan.py; docs/performance.md)."""
