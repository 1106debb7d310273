"""Which HF architecture reproduces a config exactly, and each architecture's module by name.

Dense pre-norm models go to LlamaForCausalLM or GPT2LMHeadModel, dense `norm_placement=sandwich` ones
to Gemma2ForCausalLM (with soft caps and local/global windows), `model/ffn=moe` ones to OLMoE, Mixtral
or Qwen3-MoE (moe_targets), because only these reproduce gptlab's blocks exactly; each lives in its
own module (`llama.py`, `gpt2.py`, `gemma2.py`, `olmoe.py`, `mixtral.py`, `qwen3_moe.py`) with its
names and config.json.
"""

from __future__ import annotations

from types import ModuleType

from gptlab.export import gemma2, gpt2, llama
from gptlab.export.moe_targets import MOE_ARCHS, NAMES, moe_kind
from gptlab.model.config import GPTConfig

DENSE_ARCHS: dict[str, ModuleType] = {llama.KIND: llama, gpt2.KIND: gpt2}  # tried in this order
DENSE_TYPES = tuple(DENSE_ARCHS)
ARCHS: dict[str, ModuleType] = DENSE_ARCHS | {gemma2.KIND: gemma2} | MOE_ARCHS
MODEL_TYPES = tuple(ARCHS)
ARCHITECTURES = {kind: arch.ARCHITECTURE for kind, arch in ARCHS.items()}
# attention switches the pre-norm targets lack (field: its off value, what the targets lack); pos_emb=none
# is refused by each target's REQUIRED pos_emb. Llama's default RoPE in transformers 5.25 rotates
# every head dimension (its partial_rotary_factor is read by other model types). Soft caps and
# windows map to Gemma2ForCausalLM, whose blocks are sandwich-norm: the message says so.
GEMMA2 = f"{gemma2.ARCHITECTURE} has it, with model.norm_placement='sandwich'"
ATTENTION_OFF: dict[str, tuple[object, str]] = {
    "rope_fraction": (1.0, "their RoPE rotates every head dimension"),
    "nope_every": (None, "every layer applies the same position encoding"),
    "attn_gate": ("none", "no gate on the attention output"),
    "attn_softcap": (None, f"no cap on the attention logits; {GEMMA2}"),
    "logit_softcap": (None, f"no cap on the output logits; {GEMMA2}"),
    "window": (None, f"every layer attends globally; {GEMMA2}"),
}


def target_names(cfg: GPTConfig) -> str:
    """The architectures that could hold `cfg`, as refusals name them."""
    if cfg.ffn == "moe":
        return NAMES
    return gemma2.ARCHITECTURE if cfg.norm_placement == "sandwich" else "LlamaForCausalLM or GPT2LMHeadModel"


def check_exportable(cfg: GPTConfig) -> str:
    """The HF architecture that reproduces `cfg` exactly (its model_type), else why none does."""
    targets = target_names(cfg)
    every = "they" if cfg.ffn == "moe" else "both"
    if cfg.parametrization == "completep" and cfg.mup_base_depth != cfg.n_layer:
        raise ValueError(
            f"model.parametrization='completep' at model.n_layer={cfg.n_layer} != model.mup_base_depth="
            f"{cfg.mup_base_depth} cannot be expressed by {targets} (no "
            "residual-branch multiplier there); accepted: parametrization sp, or completep at its base "
            "depth and width (where it equals SP)"
        )
    if cfg.uses_mup and cfg.mup_base_width != cfg.n_embd:
        raise ValueError(
            f"model.parametrization={cfg.parametrization!r} at model.n_embd={cfg.n_embd} != "
            f"model.mup_base_width={cfg.mup_base_width} cannot be expressed by {targets} "
            "(no output multiplier or 1/d_head attention scale there); accepted: "
            "parametrization sp, or mup at its base width (where it equals SP)"
        )
    if targets == gemma2.ARCHITECTURE:
        return gemma2.check(cfg)
    if cfg.norm == "dyt":
        raise ValueError(
            f"model.norm='dyt' cannot be expressed by {targets} (Hugging Face has no DyT layer: {every} "
            "normalise, with RMSNorm or LayerNorm); accepted: rmsnorm or layernorm"
        )
    if cfg.qk_norm and cfg.ffn != "moe":
        raise ValueError(
            "model.qk_norm=True cannot be expressed by LlamaForCausalLM or GPT2LMHeadModel "
            "(neither normalises queries and keys); accepted: false"
        )
    if cfg.norm_placement != "pre":
        raise ValueError(
            f"model.norm_placement={cfg.norm_placement!r} cannot be expressed by "
            f"{targets} ({every} are pre-norm); accepted: 'pre'"
            + ("" if cfg.ffn == "moe" else f", or 'sandwich' ({gemma2.ARCHITECTURE})")
        )
    for name, (off, why) in ATTENTION_OFF.items():
        if getattr(cfg, name) != off:
            raise ValueError(
                f"model.{name}={getattr(cfg, name)!r} cannot be expressed by {targets} ({why}); "
                f"accepted: {off!r}"
            )
    if cfg.ffn == "moe":
        return moe_kind(cfg)
    misses = {kind: _misses(cfg, arch) for kind, arch in DENSE_ARCHS.items()}
    for kind in DENSE_TYPES:
        if not misses[kind]:
            return kind
    # Blame the nearer target; on a tie, the one whose position encoding already matches.
    near = min(
        DENSE_TYPES,
        key=lambda k: (len(misses[k]), cfg.pos_emb != ARCHS[k].REQUIRED["pos_emb"][0]),
    )
    other = next(k for k in DENSE_TYPES if k != near)
    reasons = "; ".join(
        f"model.{name}={value!r} cannot be expressed by {ARCHITECTURES[near]} ({why}); accepted: {want!r}"
        for name, value, want, why in misses[near]
    )
    needs = ", ".join(f"{name}={want!r}" for name, _, want, _ in misses[other])
    raise ValueError(f"{reasons} (the other target, {ARCHITECTURES[other]}, would need {needs})")


def _misses(cfg: GPTConfig, arch: ModuleType) -> list[tuple[str, object, object, str]]:
    """(field, value, accepted, why) for each field of `cfg` that `arch` cannot reproduce."""
    out = [
        (name, getattr(cfg, name), want, why)
        for name, (want, why) in arch.REQUIRED.items()
        if getattr(cfg, name) != want
    ]
    if cfg.kv_heads != cfg.n_head and not arch.GROUPED_KV:
        out.append(("n_kv_head", cfg.n_kv_head, None, "it has one key/value head per query head"))
    return out
