"""Which telemetry group a parameter belongs to, and the local part of a (possibly sharded) tensor.

One home for what telemetry and the non-finite guard both need. The groups are the ones
docs/architecture.md names: embed, block_XX (and its /attn, /ffn halves), final_norm, head.
"""

from __future__ import annotations

import re

import torch

_BLOCK = re.compile(r"^blocks\.(\d+)\.(attn|attn_norm|attn_out_norm|ffn|ffn_norm|ffn_out_norm)\.")


def group_names(param_name: str) -> list[str]:
    """The telemetry groups a parameter belongs to (a block's QK-norm gains are part of its attn)."""
    if param_name.startswith(("tok_emb.", "pos_emb.")):
        return ["embed"]
    if param_name.startswith("final_norm."):
        return ["final_norm"]
    if param_name.startswith("lm_head."):
        return ["head"]
    m = _BLOCK.match(param_name)
    if m is None:
        return []
    block = f"block_{int(m.group(1)):02d}"
    part = "attn" if m.group(2).startswith("attn") else "ffn"
    return [block, f"{block}/{part}"]


def local(t: torch.Tensor) -> torch.Tensor:
    """This rank's shard of an FSDP2 DTensor; any other tensor as it is."""
    return t.to_local() if hasattr(t, "to_local") else t
