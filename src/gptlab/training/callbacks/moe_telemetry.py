"""Layer telemetry's MoE family (model/ffn=moe): per MoE layer, from the optimizer step's routing
summed over its micro-batches and, under DDP or FSDP2, over ranks (packed into telemetry's one SUM
all-reduce: each rank routes its own tokens, so loads add up), the keys `moe/block_XX/<name>`:

- `max_over_mean_load`: the largest expert's tokens over the mean expert's (1 = perfectly even);
- `dead_experts`: experts that got no token in the step (over all ranks);
- `router_entropy`: the mean over tokens of H(p) = −Σ_e p_e log p_e of the router's probabilities
  (softmax scores; sigmoid scores normalised to sum to 1, as the aux loss reads them), in nats;
- `aux_loss`, `z_loss`: the step's mean over micro-batches and ranks, before their coefficients;
- `dropped`: the step's assignments over capacity (0 when dropless);
- `bias_min`, `bias_max`: the expert bias after the step (balance=bias only; MAX-reduced, equal on
  every rank since the loads it moved by were all-reduced);
- `tokens/expert_YY`: each expert's assignments in the step (dropped ones included), for layers of at
  most EXPERT_KEYS_MAX experts (OLMoE's 64 experts × 16 layers would be 1,024 keys a log step;
  `moe.routing_stats(model)` returns the vector at any size).

The sums come from MoE.step_sums and step_load (model/moe.py, accumulated on device each training
micro-batch); this module packs them on log steps only and names the values.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from gptlab.model import moe
from gptlab.model.moe_config import EXPERT_KEYS_MAX

SUMS = 6  # MoE.step_sums: Σ entropy, tokens, Σ aux, Σ z, forwards, Σ dropped


@dataclass
class MoEPack:
    """One log step's routing, this rank's: `loads` (L, E), `sums` (L, 6), `biased` per layer."""

    blocks: list[str]
    loads: torch.Tensor
    sums: torch.Tensor
    layers: list[moe.MoE]

    @property
    def biased(self) -> list[bool]:
        return [layer.mcfg.balance == "bias" for layer in self.layers]


def block_name(module_name: str) -> str:
    """blocks.3.ffn → block_03 (the telemetry groups' names)."""
    parts = module_name.split(".")
    return f"block_{int(parts[1]):02d}" if parts[0] == "blocks" else module_name


def snapshot(model: nn.Module) -> MoEPack | None:
    """The step's loads and sums before the optimizer step (whose bias update consumes the loads);
    copies, so an in-place all-reduce there leaves them alone. None for a dense model."""
    named = [(n, m) for n, m in model.named_modules() if isinstance(m, moe.MoE) and m.step_sums is not None]
    if not named:
        return None
    return MoEPack(
        blocks=[block_name(n) for n, _ in named],
        loads=torch.stack([m.step_load.double() for _, m in named]),  # type: ignore[union-attr]
        sums=torch.stack([m.step_sums for _, m in named]).double(),  # type: ignore[misc]
        layers=[m for _, m in named],
    )


def sum_part(pack: MoEPack) -> torch.Tensor:
    """What the SUM all-reduce adds over ranks: every layer's loads, then its sums."""
    return torch.cat([pack.loads.reshape(-1), pack.sums.reshape(-1)])


def max_part(pack: MoEPack) -> torch.Tensor:
    """What the MAX all-reduce takes: per layer max(bias) and max(−bias) after the step."""
    bias = torch.stack([layer.expert_bias.detach().double() for layer in pack.layers])
    return torch.stack([bias.max(dim=1).values, (-bias).max(dim=1).values], dim=1).reshape(-1)


def name(pack: MoEPack, sums: list[float], maxes: list[float]) -> dict[str, float]:
    """The keys from the reduced values (`sums`: sum_part's, `maxes`: max_part's)."""
    n_layers, n_experts = pack.loads.shape
    out: dict[str, float] = {}
    for j, block in enumerate(pack.blocks):
        load = sums[j * n_experts : (j + 1) * n_experts]
        at = n_layers * n_experts + j * SUMS
        entropy, tokens, aux, z, forwards, dropped = sums[at : at + SUMS]
        mean = sum(load) / n_experts
        key = f"moe/{block}/"
        out[key + "max_over_mean_load"] = max(load) / mean if mean > 0 else float("nan")
        out[key + "dead_experts"] = float(sum(1 for v in load if v == 0))
        out[key + "router_entropy"] = entropy / max(tokens, 1.0)
        out[key + "aux_loss"] = aux / max(forwards, 1.0)
        out[key + "z_loss"] = z / max(forwards, 1.0)
        out[key + "dropped"] = dropped
        if pack.biased[j]:
            out[key + "bias_max"] = maxes[2 * j]
            out[key + "bias_min"] = -maxes[2 * j + 1]
        if n_experts <= EXPERT_KEYS_MAX:  # model/moe_config.py
            out |= {f"{key}tokens/expert_{e:02d}": load[e] for e in range(n_experts)}
    return out
