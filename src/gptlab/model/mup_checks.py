"""μP's and CompleteP's settings checks (GPTConfig.__post_init__ calls them): the combinations whose
width or depth rules gptlab does not have, refused in one line before anything is built."""

from __future__ import annotations

from typing import Any  # a GPTConfig: model.config imports this module, not the reverse


def check_mup(cfg: Any) -> None:
    """μP's base width must give whole multipliers and whole base heads; DeepNorm has its own
    depth-and-width init that μP's would silently override. With init_from, n_embd is the
    checkpoint's: export.init_from checks μP there (an SP checkpoint is μP's function only at
    the base width)."""
    base = cfg.mup_base_width
    if cfg.init_from is not None:  # n_embd is the checkpoint's, known in export.init_from, which checks
        return
    if isinstance(base, bool) or not isinstance(base, int) or base <= 0:
        raise ValueError(
            f"model.mup_base_width={base!r} is not accepted with model.parametrization=mup; give a "
            "positive integer that divides model.n_embd (the width μP equals SP at)"
        )
    if base > cfg.n_embd or cfg.n_embd % base != 0:
        what = "exceeds" if base > cfg.n_embd else "does not divide"
        raise ValueError(
            f"model.mup_base_width={base} {what} model.n_embd={cfg.n_embd}; accepted: a "
            "divisor of n_embd (the width multiplier n_embd/mup_base_width must be a whole number >= 1)"
        )
    head = cfg.mup_base_head_dim
    if head is None and base % cfg.n_head != 0:
        raise ValueError(
            f"model.mup_base_width={base} is not divisible by model.n_head={cfg.n_head}; the base "
            "model keeps the heads, so its head width mup_base_width/n_head must be whole (or give "
            "model.mup_base_head_dim, the base model's head width)"
        )
    if head is not None and (
        isinstance(head, bool)
        or not isinstance(head, int)
        or head <= 0
        or base % head != 0
        or (base == cfg.n_embd and head != cfg.head_dim)
    ):
        raise ValueError(
            f"model.mup_base_head_dim={head!r} is not accepted with model.mup_base_width={base} and "
            f"model.n_embd={cfg.n_embd}, n_head={cfg.n_head}; accepted: null (the base keeps the "
            "heads), or a positive divisor of mup_base_width that is the model's own head width "
            "when n_embd equals mup_base_width"
        )
    if cfg.norm_placement == "deepnorm":
        raise ValueError(
            "model.parametrization=mup cannot be combined with model.norm_placement=deepnorm (DeepNet's "
            "Xavier init and β scaling have no μP form here); accepted: placement pre, post or sandwich"
        )
    if cfg.attn_gate == "headwise":
        raise ValueError(
            "model.attn_gate=headwise cannot be combined with model.parametrization=mup: its W_g "
            "(d → n_head) has a fan-out that does not grow with n_embd, an output weight of μP with "
            "no rule here; accepted: attn_gate none or elementwise (a hidden matrix, q_proj's rules)"
        )
    if cfg.ffn_hidden is not None:
        raise ValueError(
            f"model.ffn_hidden={cfg.ffn_hidden} cannot be combined with model.parametrization=mup: a "
            "fixed FFN width does not grow with n_embd, so up and down would be output and input "
            "weights of μP, for which no rule is given here; accepted: ffn_hidden=null"
        )


def check_completep(cfg: Any) -> None:
    """CompleteP's depth rules are derived for pre-norm blocks (Dey et al. 2025); its base depth
    must be a real model's, no deeper than this one."""
    base = cfg.mup_base_depth
    depth_known = cfg.init_from is None  # else n_layer is the checkpoint's: export.init_from checks
    if (
        isinstance(base, bool)
        or not isinstance(base, int)
        or base < 1
        or (depth_known and base > cfg.n_layer)
    ):
        raise ValueError(
            f"model.mup_base_depth={base!r} is not accepted with model.parametrization=completep "
            f"and model.n_layer={cfg.n_layer}; give an integer from 1 to n_layer (the depth "
            "CompleteP equals μP at)"
        )
    if cfg.norm_placement != "pre":
        raise ValueError(
            f"model.parametrization=completep cannot be combined with model.norm_placement="
            f"{cfg.norm_placement!r}: its residual scaling is derived for pre-norm blocks; "
            "accepted: placement pre"
        )
