"""The GPU check: one prepared call on a lent GPU (one H100, at most 8 minutes) that measures what
issue 43 asks, in one process and a fixed order, each section time-boxed, and writes
`gpu_check.json` and `gpu_check.md` to the output folder. A section that fails or runs out of time
is recorded as such and the rest go on. `--dry-run` runs the same sections at a tiny shape on a
CPU (tests/bench/test_gpu_check.py). docs/performance.md ("GPU: not measured in this session")
says how to run it; `make gpu-wheels` prepares the packages the lent image lacks.

Supported torch: 2.11 (the lent image) and 2.13 (tested here). Every torch call the check and the
training path make exists in both: torch.compiler.set_stance (2.6), torch.nn.utils.get_total_norm
and clip_grads_with_norm_ (2.6), torch.distributed.fsdp.fully_shard (2.6), set_sync_debug_mode
(1.10), torch.optim.Muon (2.9; only optim=muon); FSDP2's set_force_sum_reduction_for_comms is
guarded where it is used (strategies._sum_then_divide).
"""
