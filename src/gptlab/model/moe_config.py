"""MoEConfig: the `model.moe.*` fields of `model/ffn=moe`, validated at construction.

Defaults and where each comes from are in docs/moe.md; the layer itself is model/moe.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

# scores over the experts: softmax (Switch, Mixtral, OLMoE), sigmoid (DeepSeek-V3)
ROUTERS = ("softmax", "sigmoid")
BALANCES = ("aux_loss", "bias", "none")  # Switch/OLMoE's auxiliary loss, DeepSeek-V3's bias, nothing
# torch._grouped_mm, or one matmul per expert; auto: grouped where it runs
IMPLS = ("auto", "grouped", "loop")
# telemetry logs each expert's token count for layers of at most this many experts (the wandb view
# draws them); OLMoE's 64 experts × 16 layers would be 1,024 keys a log step
EXPERT_KEYS_MAX = 16


@dataclass
class MoEConfig:
    """A mixture of `n_experts` FFNs of type `expert_ffn`, `top_k` of them per token, plus
    `n_shared` experts every token passes through."""

    n_experts: int = 8
    top_k: int = 2
    expert_ffn: str = "swiglu"  # each expert is one of the dense axis's FFNs (GPTConfig checks which)
    expert_hidden: int | None = None  # None: the dense rule (8/3·d gated, 4·d ungated); less: fine-grained
    n_shared: int = 0  # always-on experts (DeepSeekMoE), each of width expert_hidden
    router: str = "softmax"
    norm_topk: bool = True  # renormalise the k chosen gate weights to sum to 1
    balance: str = "aux_loss"
    aux_loss_coef: float = 0.01  # balance=aux_loss: coefficient of n_experts · Σ_i f_i · P_i
    bias_update_rate: float = 0.001  # balance=bias: γ of b_i += γ · sign(mean load − load_i)
    router_z_loss: float = 0.001  # coefficient of mean (logsumexp of the router logits)²; 0: off
    capacity_factor: float | None = None  # None: dropless; else each expert keeps ⌈cf · N·k / E⌉ tokens
    first_dense_layers: int = 0  # blocks 0 .. first_dense_layers-1 keep the dense FFN of expert_ffn
    impl: str = "auto"

    def __post_init__(self) -> None:
        for name in ("n_experts", "top_k"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"model.moe.{name}={value!r} is not accepted; give an integer >= 1")
        if self.top_k > self.n_experts:
            raise ValueError(
                f"model.moe.top_k={self.top_k} exceeds model.moe.n_experts={self.n_experts}; accepted: "
                "an integer from 1 to n_experts"
            )
        for name in ("n_shared", "first_dense_layers"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"model.moe.{name}={value!r} is not accepted; give an integer >= 0")
        hidden = self.expert_hidden
        if hidden is not None and (isinstance(hidden, bool) or not isinstance(hidden, int) or hidden < 1):
            raise ValueError(
                f"model.moe.expert_hidden={hidden!r} is not accepted; give a positive integer or null "
                "(null = the dense rule: 8/3·d gated, 4·d ungated)"
            )
        for name, value, accepted in (
            ("router", self.router, ROUTERS),
            ("balance", self.balance, BALANCES),
            ("impl", self.impl, IMPLS),
        ):
            if value not in accepted:
                accepted_list = ", ".join(accepted)
                raise ValueError(f"model.moe.{name}={value!r} is not accepted; choose one of {accepted_list}")
        if not isinstance(self.norm_topk, bool):
            raise ValueError(f"model.moe.norm_topk={self.norm_topk!r} is not accepted; give true or false")
        for name in ("aux_loss_coef", "bias_update_rate", "router_z_loss"):
            value = getattr(self, name)
            if _not_number(value) or value < 0:
                raise ValueError(f"model.moe.{name}={value!r} is not accepted; give a finite number >= 0")
        cf = self.capacity_factor
        if cf is not None and (_not_number(cf) or cf <= 0):
            raise ValueError(
                f"model.moe.capacity_factor={cf!r} is not accepted: a capacity of 0 drops every token; "
                "give a finite number > 0 (each expert keeps ⌈cf·tokens·top_k/n_experts⌉) or null (dropless)"
            )

    def capacity(self, n_tokens: int) -> int:
        """Assignments each expert keeps out of n_tokens·top_k (all of them when dropless)."""
        assigned = n_tokens * self.top_k
        if self.capacity_factor is None:
            return assigned
        return math.ceil(self.capacity_factor * assigned / self.n_experts)

    @classmethod
    def coerce(cls, value: Any) -> MoEConfig:
        """A MoEConfig from itself, a plain dict (a checkpoint's hparams, a resolved Hydra node) or None."""
        if isinstance(value, cls):
            return value
        if value is None:
            return cls()
        if isinstance(value, dict):
            known = {f.name for f in fields(cls)}
            unknown = sorted(set(value) - known)
            if unknown:
                raise ValueError(f"unknown model.moe field(s) {unknown}; accepted: {sorted(known)}")
            return cls(**value)
        raise ValueError(f"model.moe={value!r} is not accepted; give a mapping of model.moe.* fields")


def _not_number(value: Any) -> bool:
    return isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value)
