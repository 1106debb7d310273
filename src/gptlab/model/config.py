"""GPTConfig: every architectural choice the ablations vary, validated at construction."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import Any

from gptlab.model.masks import check_window, layer_window
from gptlab.model.moe_config import MoEConfig
from gptlab.model.mup_checks import check_completep, check_mup

NORMS = ("rmsnorm", "layernorm", "dyt")  # dyt: Dynamic Tanh, no normalisation (model/norms.py)
PLACEMENTS = ("pre", "post", "sandwich", "deepnorm")
GATED_FFNS = ("swiglu", "geglu", "reglu", "geglu_tanh")  # geglu_tanh: Gemma's GeGLU
UNGATED_FFNS = ("gelu", "gelu_tanh", "relu")
FFNS = GATED_FFNS + UNGATED_FFNS  # the dense FFNs; `moe` (model/moe.py) mixes experts of one of them
POS_EMBS = ("rope", "learned", "none")  # none: no position signal but the causal mask (NoPE)
QK_NORM_SCOPES = ("head", "full")  # qk_norm per head or over the whole projection (model/attention.py)
ATTN_GATES = ("none", "headwise", "elementwise")  # sigmoid gate on each head's output (model/attention.py)
DEPTH_SCALES = ("none", "global", "per_layer")
INIT_STD_RULE = "1/sqrt(d)"
# which blocks recompute their activations in backward (GPT.checkpoints; docs/performance.md)
ACTIVATION_CHECKPOINTING = ("none", "full", "selective")
PARAMETRIZATIONS = ("sp", "mup", "completep")  # standard, μP (Yang et al. 2022), μP + depth (Dey et al. 2025)


def _choice(name: str, value: Any, accepted: tuple[str, ...]) -> None:
    if value not in accepted:
        raise ValueError(f"model.{name}={value!r} is not accepted; choose one of {', '.join(accepted)}")


def _positive(name: str, value: Any, also: str = "") -> None:
    # isfinite: NaN slips through `value <= 0`, and NaN or inf would silently poison the weights
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ValueError(f"model.{name}={value!r} must be a positive finite number{also}")


@dataclass
class GPTConfig:
    """The model group's schema: a Hydra structured config and the GPT constructor's argument."""

    vocab_size: int = 256
    block_size: int = 256
    n_layer: int = 4
    n_head: int = 4
    # key/value heads: None = n_head (multi-head), 1 (multi-query), or any divisor of n_head
    # (grouped-query, Ainslie et al. 2023): query head h reads key/value head h // (n_head / n_kv_head)
    n_kv_head: int | None = None
    # each head's width; None: n_embd / n_head. Set, q and out project d ↔ n_head·attn_head_dim
    # (Qwen3's 128 at d=2048, 32 heads: the qwen3_30b_a3b preset)
    attn_head_dim: int | None = None
    n_embd: int = 128
    norm: str = "rmsnorm"
    norm_eps: float = 1e-5
    dyt_alpha0: float = 0.5  # norm=dyt: every site's α at init (Zhu et al. 2025's default)
    norm_placement: str = "pre"
    ffn: str = "swiglu"
    ffn_hidden: int | None = None  # None: 4·d ungated, 8/3·d gated (rounded up to ffn_multiple_of)
    ffn_multiple_of: int = 64
    moe: MoEConfig | None = None  # ffn=moe: model.moe.* (conf/model/ffn/moe.yaml; docs/moe.md)
    tie_embeddings: bool = True
    pos_emb: str = "rope"
    rope_theta: float = 10000.0
    rope_fraction: float = 1.0  # RoPE on the first rope_fraction·d_head dims of each head (an even count)
    nope_every: int | None = None  # every k-th layer without RoPE: layers i with (i+1) % k == 0 (Llama 4)
    attn_gate: str = "none"  # none | headwise | elementwise (Qiu et al. 2025)
    attn_softcap: float | None = None  # c·tanh(logit/c) on attention logits (Gemma 2); null = off
    logit_softcap: float | None = None  # the same on the output logits; null = off
    window: int | None = None  # local layers see the last `window` tokens, themselves included; null: global
    window_pattern: str | None = None  # S/L letters, layer i local if pattern[i % len] == "S"; null: all S
    bias: bool = False
    dropout: float = 0.0
    qk_norm: bool = False  # RMSNorm per head on queries and keys, before RoPE (OLMo-2; Dehghani et al.)
    # what qk_norm normalises over: each head's d_head (Qwen3, one gain of d_head shared by the heads),
    # or all heads' concatenated projection at once (OLMoE: gains of n_head·d_head and n_kv_head·d_head)
    qk_norm_scope: str = "head"
    init_std: Any = 0.02  # a number, or the string "1/sqrt(d)"
    depth_scaled_init: str = "global"
    init_from: str | None = None  # a local Hugging Face directory (Llama or GPT-2) to start from
    # none | full (every block) | selective (every k-th block, k = activation_checkpointing_every);
    # a memory/compute trade, not architecture: the same function, and a resume may change it
    activation_checkpointing: str = "none"
    activation_checkpointing_every: int = 2
    parametrization: str = "sp"
    mup_base_width: int | None = None  # μP: the width whose SP model μP equals (read only under mup)
    # μP: the base model's head width; None: mup_base_width / n_head (the base keeps the heads and
    # narrows them); a ladder that adds heads at a fixed head width gives that width
    mup_base_head_dim: int | None = None
    mup_base_depth: int | None = None  # CompleteP: the depth whose μP model CompleteP equals

    def __post_init__(self) -> None:
        for name in (
            "vocab_size",
            "block_size",
            "n_layer",
            "n_head",
            "n_embd",
            "ffn_multiple_of",
            "activation_checkpointing_every",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"model.{name}={value!r} must be a positive integer")
        if self.ffn_hidden is not None:
            if (
                isinstance(self.ffn_hidden, bool)
                or not isinstance(self.ffn_hidden, int)
                or self.ffn_hidden <= 0
            ):
                raise ValueError(
                    f"model.ffn_hidden={self.ffn_hidden!r} must be a positive integer or null "
                    "(null = 4·d ungated, 8/3·d gated)"
                )
        _choice("norm", self.norm, NORMS)
        _choice("norm_placement", self.norm_placement, PLACEMENTS)
        _choice("ffn", self.ffn, (*FFNS, "moe"))
        if self.ffn == "moe":
            self._check_moe()
        _choice("pos_emb", self.pos_emb, POS_EMBS)
        _choice("attn_gate", self.attn_gate, ATTN_GATES)
        _choice("depth_scaled_init", self.depth_scaled_init, DEPTH_SCALES)
        _choice("activation_checkpointing", self.activation_checkpointing, ACTIVATION_CHECKPOINTING)
        _choice("parametrization", self.parametrization, PARAMETRIZATIONS)
        _positive("norm_eps", self.norm_eps)
        _positive("dyt_alpha0", self.dyt_alpha0)
        _positive("rope_theta", self.rope_theta)
        if self.attn_head_dim is not None:
            hd = self.attn_head_dim
            if isinstance(hd, bool) or not isinstance(hd, int) or hd < 1:
                raise ValueError(
                    f"model.attn_head_dim={hd!r} is not accepted; give a positive integer or null "
                    "(n_embd/n_head)"
                )
            if self.uses_mup:
                raise ValueError(
                    f"model.attn_head_dim={hd} cannot be combined with model.parametrization="
                    f"{self.parametrization}: μP's head rules read n_embd/n_head; accepted: "
                    "attn_head_dim=null"
                )
        elif self.n_embd % self.n_head != 0:
            raise ValueError(
                f"model.n_embd={self.n_embd} is not divisible by model.n_head={self.n_head}; "
                "n_embd must be a multiple of n_head"
            )
        self._check_kv_heads()
        self._check_attention()
        check_window(self.window, self.window_pattern)
        if self.pos_emb == "rope" and self.rope_fraction == 1 and self.head_dim % 2 != 0:
            raise ValueError(
                f"model.pos_emb='rope' needs an even head dimension, got n_embd/n_head={self.head_dim}; "
                "change n_embd or n_head, or use pos_emb=learned"
            )
        if (
            isinstance(self.dropout, bool)
            or not isinstance(self.dropout, int | float)
            or not (0.0 <= self.dropout < 1.0)
        ):
            raise ValueError(f"model.dropout={self.dropout!r} must be in [0, 1)")
        if not isinstance(self.qk_norm, bool):
            raise ValueError(f"model.qk_norm={self.qk_norm!r} is not accepted; give true or false")
        _choice("qk_norm_scope", self.qk_norm_scope, QK_NORM_SCOPES)
        if isinstance(self.init_std, str):
            if self.init_std != INIT_STD_RULE:
                raise ValueError(
                    f"model.init_std={self.init_std!r} is not accepted; give a positive number "
                    f"or the string '{INIT_STD_RULE}'"
                )
        else:
            _positive("init_std", self.init_std, also=f" or the string '{INIT_STD_RULE}'")
        if self.norm == "dyt" and self.norm_placement == "deepnorm":
            raise ValueError(
                "model.norm=dyt cannot be combined with model.norm_placement=deepnorm: DeepNet's α and β "
                "are derived for a norm that rescales α·x + F(x), which DyT does not; accepted: "
                "placement pre, post or sandwich"
            )
        if self.norm_placement == "deepnorm" and self.depth_scaled_init != "none":
            raise ValueError(
                f"model.depth_scaled_init={self.depth_scaled_init!r} cannot be combined with "
                "norm_placement=deepnorm, whose own β scaling replaces it; set depth_scaled_init=none"
            )

        if self.uses_mup:
            check_mup(self)
        if self.parametrization == "completep":
            check_completep(self)

    def _check_moe(self) -> None:
        """model.moe.* as a MoEConfig; what has no MoE rule here is refused in one line."""
        self.moe = MoEConfig.coerce(self.moe)
        _choice("moe.expert_ffn", self.moe.expert_ffn, FFNS)
        for field, value, why in (
            (
                "parametrization",
                self.parametrization,
                "μP's width rules for experts and router are not stated",
            ),
            ("norm_placement", self.norm_placement, "DeepNet's init has no rule for expert matrices"),
        ):
            if value in ("mup", "completep", "deepnorm"):
                raise ValueError(
                    f"model.ffn=moe cannot be combined with model.{field}={value}: {why}; accepted: "
                    "parametrization=sp, placement pre, post or sandwich"
                )

    def _check_kv_heads(self) -> None:
        kv = self.n_kv_head
        if kv is None:
            return
        if isinstance(kv, bool) or not isinstance(kv, int) or kv < 1 or self.n_head % kv != 0:
            raise ValueError(
                f"model.n_kv_head={kv!r} is not accepted with model.n_head={self.n_head}; give null "
                "(= n_head, multi-head), 1 (multi-query) or a divisor of n_head (grouped-query)"
            )

    def _check_attention(self) -> None:
        """Positions (rope_fraction, nope_every need RoPE to act on) and the soft caps."""
        for name in ("attn_softcap", "logit_softcap"):
            if getattr(self, name) is not None:
                _positive(name, getattr(self, name), also=" or null (off)")
        frac = self.rope_fraction
        if isinstance(frac, bool) or not isinstance(frac, int | float) or not 0 < frac <= 1:
            raise ValueError(f"model.rope_fraction={frac!r} is not accepted; give a number in (0, 1]")
        every = self.nope_every
        if every is not None and (isinstance(every, bool) or not isinstance(every, int) or every < 1):
            raise ValueError(
                f"model.nope_every={every!r} is not accepted; give null (RoPE in every layer) or an "
                "integer k >= 1 (layers i with (i+1) % k == 0 go without RoPE)"
            )
        for name, off in (("rope_fraction", 1.0), ("nope_every", None)):
            if self.pos_emb != "rope" and getattr(self, name) != off:
                raise ValueError(
                    f"model.{name}={getattr(self, name)!r} needs model.pos_emb=rope (it says where RoPE "
                    f"acts), got pos_emb={self.pos_emb!r}; accepted with it: {name}={off}"
                )
        if (
            self.pos_emb == "rope"
            and frac < 1
            and (
                not math.isclose(frac * self.head_dim, self.rope_dims)
                or self.rope_dims % 2
                or not self.rope_dims
            )
        ):
            raise ValueError(
                f"model.rope_fraction={frac} of d_head={self.head_dim} is not an even whole number of "
                "dimensions; accepted: a fraction in (0, 1] with rope_fraction·d_head even and >= 2"
            )

    @property
    def uses_mup(self) -> bool:
        """μP's width rules apply (mup, and completep, which is μP plus depth rules)."""
        return self.parametrization in ("mup", "completep")

    def checkpoints(self, i: int) -> bool:
        """Whether block i recomputes its activations in backward instead of keeping them.

        `selective` checkpoints blocks 0, k, 2k, ... (k = activation_checkpointing_every): whole
        blocks, so the choice composes unchanged with DDP, FSDP2's per-block units and
        `compile=true`'s per-block graphs (an op-level policy, e.g. keep matmul outputs and recompute
        the elementwise ops, would not reach inside a compiled block, whose ops the eager dispatcher
        never sees). It saves about 1/k of what `full` saves, for about 1/k of its recompute.
        """
        if self.activation_checkpointing == "full":
            return True
        if self.activation_checkpointing == "selective":
            return i % self.activation_checkpointing_every == 0
        return False

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head if self.attn_head_dim is None else self.attn_head_dim

    @property
    def rope_dims(self) -> int:
        """Dimensions of each head RoPE rotates (the first ones): rope_fraction · d_head."""
        return round(self.rope_fraction * self.head_dim)

    def rotates(self, i: int) -> bool:
        """Whether layer i applies RoPE: pos_emb=rope, unless nope_every=k and (i+1) % k == 0 (with
        k = 4: layers 3, 7, 11, ..., the last of every four, as Llama 4 interleaves its NoPE layers)."""
        every = self.nope_every
        return self.pos_emb == "rope" and not (every is not None and (i + 1) % every == 0)

    def window_at(self, i: int) -> int | None:
        """Layer i's sliding window (model.window where model.window_pattern says S), None: global."""
        return layer_window(self.window, self.window_pattern, i)

    @property
    def kv_heads(self) -> int:
        """Key/value heads: n_kv_head, or n_head when it is null (multi-head attention)."""
        return self.n_head if self.n_kv_head is None else self.n_kv_head

    def is_moe(self, i: int) -> bool:
        """Whether block i's FFN is a mixture of experts (blocks below moe.first_dense_layers are not)."""
        return self.ffn == "moe" and self.moe is not None and i >= self.moe.first_dense_layers

    @property
    def ffn_kind(self) -> str:
        """The dense FFN type: `ffn`, or under ffn=moe each expert's (moe.expert_ffn)."""
        return self.moe.expert_ffn if self.ffn == "moe" and self.moe is not None else self.ffn

    @property
    def expert_hidden(self) -> int:
        """Each expert's FFN width under ffn=moe: moe.expert_hidden, else the dense width."""
        hidden = self.moe.expert_hidden if self.moe is not None else None
        return self.hidden_dim if hidden is None else hidden

    @property
    def gated(self) -> bool:
        return self.ffn_kind in GATED_FFNS

    @property
    def hidden_dim(self) -> int:
        """FFN width: explicit, or the equal-parameter rule (4·d ungated, 8/3·d gated)."""
        return self.hidden_dim_at(self.n_embd)

    def hidden_dim_at(self, width: int) -> int:
        """The FFN width this config gives a model of width `width` (μP's base model uses it)."""
        if self.ffn_hidden is not None:
            return self.ffn_hidden
        if not self.gated:
            return 4 * width
        m = self.ffn_multiple_of
        return m * math.ceil(8 * width / 3 / m)

    @property
    def std(self) -> float:
        """The base init σ, resolving the '1/sqrt(d)' rule (under μP at the base width: μP keeps the
        base model's σ and scales only the hidden matrices')."""
        if self.init_std == INIT_STD_RULE:
            width = self.mup_base_width if self.uses_mup else self.n_embd
            return 1.0 / math.sqrt(width or self.n_embd)
        return float(self.init_std)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> GPTConfig:
        """Build from a plain dict (e.g. a resolved Hydra node), naming any unknown key."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown model field(s) {unknown}; accepted: {sorted(known)}")
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
