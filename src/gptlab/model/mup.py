"""μP's width multipliers (Yang et al. 2022, Tensor Programs V, Adam; the multiplier form of its Table 8).

With m = n_embd / mup_base_width, relative to the standard-parametrization (SP) model of the base width:
  * hidden matrices (q, k, v, out, gate, up, down): init σ × (fan_in / base fan_in)^(-1/2), Adam LR ×
    (fan_in / base fan_in)^(-1), the ratio of the matrix's own fan-in (d, or the FFN width for down).
    With grouped-query or multi-query attention (model.n_kv_head) k and v are d × n_kv_head·d_h: their
    fan-in is still d, so they follow q's rules exactly (fewer output columns change no factor), and
    under CompleteP their Adam ε is every block parameter's;
  * input weights (tok_emb, pos_emb), norm gains, biases: σ and LR as at the base width;
  * the output: logits × 1/m, the head's σ and LR as at the base width. A tied head is the input table
    itself, whose σ and LR are constant anyway: the one multiplier is the whole rule, so tying and
    untying are both defined (the paper's Table 3 form, without a multiplier, asks the output for σ ∝ 1/m
    and LR ∝ 1/m, which a tied table cannot also give its input; it is not offered);
  * attention logits q·k × sqrt(d_h0)/d_h (1/d_h, equal to SP's 1/sqrt(d_h0) at the base head width
    d_h0: mup_base_width / n_head when the base model has the same heads, or mup_base_head_dim when
    heads are added at a fixed width, where d_h = d_h0 and the scale stays SP's at every width).
At m = 1 every factor is exactly 1 (or not applied), so μP is SP there bit for bit.

CompleteP (Dey et al. 2025, α = 1; `parametrization=completep`) is μP plus depth rules, with
m_L = n_layer / mup_base_depth: each block's branch output × 1/m_L before it joins the stream, the
Adam ε of every parameter inside the blocks × 1/m_L, and depth_scaled_init's 1/sqrt(2L) taken at
the base depth (the multiplier scales in depth instead). With α = 1 no learning rate depends on
depth. At m_L = 1 it is μP bit for bit.
"""

from __future__ import annotations

import re

from gptlab.model.config import GPTConfig

HIDDEN = re.compile(r"blocks\.\d+\.(attn\.(q|k|v|out|gate)_proj|ffn\.(gate|up|down)_proj)\.weight$")


def width_mult(cfg: GPTConfig) -> float:
    """m = n_embd / mup_base_width under μP; 1 under SP."""
    if not cfg.uses_mup or cfg.mup_base_width is None:
        return 1.0
    return cfg.n_embd / cfg.mup_base_width


def fan_in_mult(cfg: GPTConfig, name: str) -> float:
    """A hidden matrix's fan-in over its fan-in at the base width (1: not hidden, or SP)."""
    if width_mult(cfg) == 1.0 or not HIDDEN.search(name):
        return 1.0
    if name.endswith("down_proj.weight"):
        return cfg.hidden_dim / cfg.hidden_dim_at(cfg.mup_base_width)  # type: ignore[arg-type]
    return width_mult(cfg)


def init_std_mult(cfg: GPTConfig, name: str) -> float:
    """σ's factor: variance ∝ 1/fan_in for hidden matrices."""
    return fan_in_mult(cfg, name) ** -0.5


def lr_mult(cfg: GPTConfig, name: str) -> float:
    """Adam LR's factor: ∝ 1/fan_in for hidden matrices, 1 for the rest."""
    return 1.0 / fan_in_mult(cfg, name)


def logit_mult(cfg: GPTConfig) -> float:
    """The output multiplier, 1/m."""
    return 1.0 / width_mult(cfg)


def base_head_dim(cfg: GPTConfig) -> int:
    """d_h0, the base model's head width: given (heads added at a fixed width), else base width / n_head."""
    if cfg.mup_base_head_dim is not None:
        return cfg.mup_base_head_dim
    return cfg.mup_base_width // cfg.n_head  # type: ignore[operator]


def attn_scale(cfg: GPTConfig) -> float | None:
    """SDPA's scale: None (its own 1/sqrt(d_h)) under SP and where d_h is the base's, else sqrt(d_h0)/d_h."""
    if width_mult(cfg) == 1.0 or cfg.head_dim == base_head_dim(cfg):
        return None
    return base_head_dim(cfg) ** 0.5 / cfg.head_dim


def depth_mult(cfg: GPTConfig) -> float:
    """m_L = n_layer / mup_base_depth under CompleteP; 1 otherwise."""
    if cfg.parametrization != "completep" or cfg.mup_base_depth is None:
        return 1.0
    return cfg.n_layer / cfg.mup_base_depth


def branch_mult(cfg: GPTConfig) -> float:
    """CompleteP's residual-branch multiplier m_L^(-α), α = 1: each block adds F(x)/m_L to the stream."""
    return 1.0 / depth_mult(cfg)


def init_depth(cfg: GPTConfig) -> int:
    """The L of depth_scaled_init's 1/sqrt(2L): the base depth under CompleteP (the branch multiplier
    does the depth scaling there, the init stays the base model's), else n_layer."""
    if cfg.parametrization == "completep" and cfg.mup_base_depth is not None:
        return cfg.mup_base_depth
    return cfg.n_layer


def adam_eps_mult(cfg: GPTConfig, name: str) -> float:
    """AdamW ε's factor: m_L^(-α) for every parameter inside the blocks under CompleteP (its Adam ε
    rule in depth); 1 for the embeddings, the final norm and the head. The paper's width factor 1/m
    on ε is not applied: μP here, like microsoft's MuAdamW, keeps ε."""
    return 1.0 / depth_mult(cfg) if name.startswith("blocks.") else 1.0
