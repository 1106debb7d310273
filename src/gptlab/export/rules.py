"""The tensor map's shared parts: one rule per HF tensor, its layout ops, and GPT(cfg)'s shapes.

A rule names one HF tensor and the gptlab tensors it is made of, so export and import read the same
table (`llama.rules`, `gpt2.rules`, the MoE targets' in moe_rules) in opposite directions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from gptlab.model.config import GPTConfig
from gptlab.model.gpt import GPT


@dataclass(frozen=True)
class Rule:
    """One HF tensor and the gptlab tensors it is made of."""

    hf: str
    ours: tuple[str, ...]
    # copy | t (GPT-2 Conv1D stores W transposed) | qkv_w, qkv_b (fused c_attn) | expert_t (expert
    # `index` of a MoE (E, in, out) stack, stored by HF per expert as an (out, in) Linear weight)
    op: str = "copy"
    index: int | None = None


SAME_SHAPE = ("copy", "gain", "embed", "tied_gain")


def _rescale(op: str, t: torch.Tensor, inverse: bool) -> torch.Tensor:
    """Gemma 2's value maps, d read off the tensor: gain w ↔ w − 1, embed W ↔ W / sqrt(d) (d: its
    columns), tied_gain w ↔ sqrt(d)·w − 1 (d: its length)."""
    if op == "gain":
        return t + 1 if inverse else t - 1
    if op == "embed":
        root = math.sqrt(t.shape[1])
        return t * root if inverse else t / root
    root = math.sqrt(t.numel())
    return (t + 1) / root if inverse else t * root - 1


def to_hf(op: str, tensors: list[torch.Tensor], index: int | None = None) -> torch.Tensor:
    """Build one HF tensor from its gptlab parts."""
    if op in SAME_SHAPE[1:]:
        return _rescale(op, tensors[0], inverse=False)
    if op == "expert_t":
        return tensors[0][index].t()
    if op == "copy":
        return tensors[0]
    if op == "t":
        return tensors[0].t()
    if op == "qkv_w":
        return torch.cat(tensors, dim=0).t()  # (3d, d) Linear layout -> (d, 3d) Conv1D layout
    return torch.cat(tensors, dim=0)


def from_hf(op: str, tensor: torch.Tensor) -> list[torch.Tensor]:
    """Split one HF tensor back into its gptlab parts (the inverse of `to_hf`; expert_t gives the one
    expert's slice, which the reader stacks)."""
    if op in SAME_SHAPE[1:]:
        return [_rescale(op, tensor, inverse=True)]
    if op == "expert_t":
        return [tensor.t()]
    if op == "copy":
        return [tensor]
    if op == "t":
        return [tensor.t()]
    if op == "qkv_w":
        return list(tensor.t().chunk(3, dim=0))
    return list(tensor.chunk(3, dim=0))


def hf_shape(op: str, shapes: list[tuple[int, ...]]) -> tuple[int, ...]:
    """The shape HF must store for a rule, given the gptlab shapes it is made of."""
    if op == "expert_t":
        return tuple(reversed(shapes[0][1:]))
    if op in SAME_SHAPE:
        return shapes[0]
    if op == "t":
        return tuple(reversed(shapes[0]))
    if op == "qkv_w":
        return (shapes[0][1], sum(s[0] for s in shapes))
    return (sum(s[0] for s in shapes),)


def gpt_shapes(cfg: GPTConfig) -> dict[str, tuple[int, ...]]:
    """Every state_dict name and shape of GPT(cfg), built on the meta device to allocate nothing."""
    with torch.device("meta"):
        model = GPT(cfg)
    return {name: tuple(t.shape) for name, t in model.state_dict().items()}


def short(names: list[str], limit: int) -> str:
    """A readable one-line list of tensor names, however many there are."""
    shown = ", ".join(names[:limit])
    return shown + (f", … ({len(names) - limit} more)" if len(names) > limit else "")
