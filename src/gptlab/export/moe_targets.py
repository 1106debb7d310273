"""Which HF MoE architecture reproduces a `model/ffn=moe` config exactly: OLMoE, Mixtral or Qwen3-MoE.

All three are Llama's pre-norm RMSNorm + RoPE block around a softmax-routed top-k mixture of SwiGLU
experts, dropless, with no shared expert and no routing bias; they differ in QK-norm (OLMoE over the
whole projection, Qwen3-MoE per head, Mixtral none), in renormalising the k gate weights (Mixtral
always, the others with norm_topk_prob) and in dense layers (Qwen3-MoE's mlp_only_layers).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from gptlab.export import mixtral, olmoe, qwen3_moe
from gptlab.model.config import GPTConfig

MOE_ARCHS: dict[str, ModuleType] = {m.KIND: m for m in (olmoe, mixtral, qwen3_moe)}  # tried in this order
NAMES = "OlmoeForCausalLM, MixtralForCausalLM or Qwen3MoeForCausalLM"
# What none of the three has: field -> (the accepted value, or a tuple of them; why).
COMMON: dict[str, tuple[Any, str]] = {
    "norm": ("rmsnorm", "they normalise with RMSNorm"),
    "pos_emb": ("rope", "they encode positions with rotary embeddings"),
    "bias": (False, "their experts, routers and norms carry no bias"),
    "moe.expert_ffn": ("swiglu", "their experts are SiLU-gated"),
    "moe.router": ("softmax", "their routers score with a softmax over the experts"),
    "moe.n_shared": (0, "they have no always-on expert (Qwen2-MoE's shared expert is not a target)"),
    "moe.balance": (
        ("aux_loss", "none"),
        "the loss-free bias changes which experts are chosen and no target's config holds it",
    ),
    "moe.capacity_factor": (None, "they are dropless: every token reaches its k experts"),
}


def value(cfg: GPTConfig, name: str) -> Any:
    """A config field by name, `moe.<field>` reaching into model.moe."""
    owner, _, field = name.rpartition(".")
    return getattr(cfg.moe if owner == "moe" else cfg, field)


def moe_kind(cfg: GPTConfig) -> str:
    """The MoE target that reproduces `cfg` exactly, else one line saying why none does."""
    for name, (want, why) in COMMON.items():
        got = value(cfg, name)
        if got not in (want if isinstance(want, tuple) else (want,)):
            accepted = " or ".join(map(repr, want)) if isinstance(want, tuple) else repr(want)
            raise ValueError(
                f"model.{name}={got!r} cannot be expressed by {NAMES} ({why}); accepted: {accepted}"
            )
    misses = {kind: _misses(cfg, arch) for kind, arch in MOE_ARCHS.items()}
    for kind, missed in misses.items():
        if not missed:
            return kind
    near = min(MOE_ARCHS, key=lambda k: len(misses[k]))  # the first of the nearest, in MOE_ARCHS order
    arch = MOE_ARCHS[near].ARCHITECTURE
    reasons = "; ".join(
        f"model.{name}={got!r} cannot be expressed by {arch} ({why}); accepted: {want!r}"
        for name, got, want, why in misses[near]
    )
    others = "; ".join(
        f"{MOE_ARCHS[k].ARCHITECTURE} would need " + ", ".join(f"{n}={w!r}" for n, _, w, _ in misses[k])
        for k in MOE_ARCHS
        if k != near
    )
    raise ValueError(f"{reasons} (the other targets: {others})")


def _misses(cfg: GPTConfig, arch: ModuleType) -> list[tuple[str, Any, Any, str]]:
    """(field, value, accepted, why) for each field of `cfg` that `arch` cannot reproduce."""
    return [
        (name, value(cfg, name), want, why)
        for name, (want, why) in arch.REQUIRED.items()
        if value(cfg, name) != want
    ]
