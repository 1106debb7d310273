"""The GPUs gptlab knows: memory and dense peak FLOP/s, one table for the MFU callback and the planner.

Dense peaks (no sparsity), per compute type: "bf16" (also fp16; tensor cores with fp32 accumulate,
what torch's bf16 matmuls run), "tf32" (fp32 matmuls on tensor cores, torch's
float32_matmul_precision "high"/"medium"), "fp32" (no tensor cores). Figures are NVIDIA's
datasheets and architecture whitepapers: H100 / H200 / L40S / A100 datasheets, the Ada (AD102)
whitepaper for the RTX 4090, the Ampere GA102 whitepaper for the RTX 3090 (GeForce cards: the
"FP32 accumulate" column, half the FP16-accumulate figure NVIDIA advertises). Memory is the
datasheet figure in GiB-sized units (an "80GB" H100 reports 79.6 GiB to CUDA, a "141GB" H200
140.4 GiB); the planner keeps a headroom fraction below it for what no tracker sees.

Lightning's own table (lightning.fabric.utilities.throughput) lists the H200 at its sparse
2 PFLOP/s and does not match a device named plainly "NVIDIA H200", hence this one.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GPU:
    name: str
    memory_gib: float
    bf16: float  # dense FLOP/s
    tf32: float
    fp32: float

    def peak(self, kind: str) -> float:
        """Dense peak FLOP/s for a compute type: "bf16", "tf32" or "fp32"."""
        return {"bf16": self.bf16, "tf32": self.tf32, "fp32": self.fp32}[kind]


GPUS: dict[str, GPU] = {
    g.name: g
    for g in (
        GPU("H200", 141, 989.4e12, 494.7e12, 66.9e12),  # SXM
        GPU("H200 NVL", 141, 835e12, 417.5e12, 60e12),
        GPU("H100 SXM", 80, 989.4e12, 494.7e12, 66.9e12),
        GPU("H100 PCIe", 80, 756e12, 378e12, 51.2e12),
        GPU("H100 NVL", 94, 835e12, 417.5e12, 60e12),
        GPU("A100 80GB", 80, 312e12, 156e12, 19.5e12),
        GPU("A100 40GB", 40, 312e12, 156e12, 19.5e12),
        GPU("L40S", 48, 362.05e12, 183e12, 91.6e12),
        GPU("RTX 4090", 24, 165.2e12, 82.6e12, 82.6e12),
        GPU("RTX 3090", 24, 71e12, 35.6e12, 35.6e12),
    )
}

# the MFU callback's view of the same table: dense peaks by compute type
PEAK_FLOPS: dict[str, dict[str, float]] = {
    name: {"bf16": g.bf16, "tf32": g.tf32, "fp32": g.fp32} for name, g in GPUS.items()
}


def chip(device_name: str) -> str | None:
    """The GPUS row of a CUDA device name (torch.cuda.get_device_name); H100s by form factor (PCIe
    boards report "PCIe" or HBM2e memory, NVL boards "NVL", SXM boards "HBM3"/"SXM" or nothing
    more); A100s by memory ("NVIDIA A100-SXM4-80GB", "NVIDIA A100 80GB PCIe"; 40GB otherwise)."""
    name = device_name.lower()
    if "h200" in name:
        return "H200 NVL" if "nvl" in name else "H200"
    if "h100" in name:
        if "pcie" in name or "hbm2e" in name:
            return "H100 PCIe"
        return "H100 NVL" if "nvl" in name else "H100 SXM"
    if "a100" in name:
        return "A100 80GB" if "80g" in name else "A100 40GB"
    if "l40s" in name:
        return "L40S"
    for key in ("4090", "3090"):
        if key in name:
            return f"RTX {key}"
    return None


def _key(name: str) -> str:
    return "".join(ch for ch in name.lower() if ch.isalnum())


# short names a user types: plan.gpu=H100 is the SXM board, A100 the 80GB one, 4090 the RTX card
ALIASES = {"h100": "H100 SXM", "a100": "A100 80GB", "4090": "RTX 4090", "3090": "RTX 3090"}


def lookup(name: str) -> GPU:
    """The GPU a user named (case, spaces and dashes ignored: "h100-sxm", "H200", "rtx4090");
    an unknown name raises one line listing the known ones."""
    key = _key(name)
    by_key = {_key(n): g for n, g in GPUS.items()}
    by_key.update({_key(a): GPUS[n] for a, n in ALIASES.items()})
    if key in by_key:
        return by_key[key]
    row = chip(name)
    if row is not None and key:
        return GPUS[row]
    raise ValueError(f"plan.gpu={name!r} is not a known GPU; known: {', '.join(GPUS)}")
