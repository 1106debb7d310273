"""Published MFU figures the planner assumes when the user gives none (plan.mfu=<fraction>).

Each row was measured by someone else, on the hardware it names, with their stack (fused kernels,
flash attention); gptlab's eager PyTorch path has not been measured on a GPU, so a row is an
anchor to correct with the GPU check (scripts/gpu_check.sh prints the measured MFU beside the
planner's), not a promise. MFU here is model FLOPs (6·N + 12·L·T·d per token, no recompute) over
the chips' dense peak, the definition `GPT.flops_per_token` and the throughput callback use.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

LLM_FOUNDRY = "mosaicml/llm-foundry scripts/train/benchmarking/README.md"


@dataclass(frozen=True)
class MFURow:
    family: str  # "H100" (also used for the H200: the same dense peak) or "A100"
    params: float  # the measured model's parameter count
    mfu: float
    source: str


MFU_TABLE: tuple[MFURow, ...] = (
    MFURow("H100", 760.5e6, 0.349, f"{LLM_FOUNDRY}, H100 80GB BF16: MPT-760M, seq 2048, 8 GPUs, no AC"),
    MFURow("H100", 1.316e9, 0.418, f"{LLM_FOUNDRY}, H100 80GB BF16: MPT-1B, seq 2048, 8 GPUs, no AC"),
    MFURow("H100", 6.659e9, 0.464, f"{LLM_FOUNDRY}, H100 80GB BF16: MPT-7B, seq 2048, 8 GPUs, no AC"),
    MFURow(
        "H100",
        8.03e9,
        0.33,
        "pytorch/torchtitan docs/performance.md: Llama 3.1 8B, FSDP2 on 8 H100, 33-39% (the low end)",
    ),
    MFURow("A100", 125.3e6, 0.448, f"{LLM_FOUNDRY}, A100 80GB: MPT-125M, seq 2048, 8 GPUs, no AC"),
    MFURow("A100", 356.0e6, 0.516, f"{LLM_FOUNDRY}, A100 80GB: MPT-350M, seq 2048, 8 GPUs, no AC"),
    MFURow("A100", 1.316e9, 0.599, f"{LLM_FOUNDRY}, A100 80GB: MPT-1B, seq 2048, 8 GPUs, no AC"),
    MFURow("A100", 6.659e9, 0.642, f"{LLM_FOUNDRY}, A100 80GB: MPT-7B, seq 2048, 8 GPUs, no AC"),
)


def family(gpu_name: str) -> str | None:
    name = gpu_name.upper()
    if name.startswith(("H100", "H200")):
        return "H100"
    if name.startswith("A100"):
        return "A100"
    return None


def table_mfu(gpu_name: str, params: int) -> MFURow | None:
    """The row of the GPU's family measured on the model nearest in size (log scale); None for a
    GPU no row was measured on (L40S, GeForce cards): the user must give plan.mfu."""
    fam = family(gpu_name)
    rows = [r for r in MFU_TABLE if r.family == fam]
    if not rows:
        return None
    return min(rows, key=lambda r: abs(math.log(r.params / params)))
