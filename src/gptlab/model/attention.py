"""Causal self-attention through SDPA (multi-head, grouped-query or multi-query), with optional rotary
position embedding (on all of each head's dimensions or a leading fraction), QK-norm, an output gate
and a soft cap on the attention logits."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from gptlab.model import mup
from gptlab.model.config import GPTConfig


def rope_tables(head_dim: int, length: int, theta: float) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin tables of shape (length, head_dim), half-split layout (the Llama convention)."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    angles = torch.outer(torch.arange(length, dtype=torch.float32), inv_freq)
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos(), angles.sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate (B, H, T, Dh) queries or keys by position: x·cos + rotate_half(x)·sin on the first
    r = cos.shape[-1] dimensions of each head (all of them unless model.rope_fraction < 1; the
    leading ones, as GPT-NeoX and Phi's partial rotary do), the other Dh - r passed through."""
    r = cos.shape[-1]
    rot, rest = (x, None) if r == x.shape[-1] else (x[..., :r], x[..., r:])
    x1, x2 = rot.chunk(2, dim=-1)
    rot = rot * cos + torch.cat([-x2, x1], dim=-1) * sin
    return rot if rest is None else torch.cat([rot, rest], dim=-1)


def softcap(x: torch.Tensor, cap: float) -> torch.Tensor:
    """Gemma 2's soft cap c·tanh(x/c): about x where |x| << c, never beyond ±c (Gemma Team 2024)."""
    return cap * torch.tanh(x / cap)


def capped_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cap: float,
    scale: float | None,
    dropout: float,
    mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """softmax(c·tanh(q·kᵀ·scale / c) + mask)·v, written out: SDPA's fused kernels take no
    function of the logits, so this path materialises the T×T scores (the memory of SDPA's math
    backend). Key/value heads are repeated for their query heads (grouped-query attention). `mask`:
    bool, True = attend (model/masks.py); None = causal."""
    group = q.shape[1] // k.shape[1]
    if group > 1:
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    s = softcap((q @ k.transpose(-1, -2)) * scale, cap)
    T = q.shape[-2]
    if mask is None:
        mask = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()
    s = s.masked_fill(~mask, float("-inf"))
    p = torch.softmax(s.float(), dim=-1).to(q.dtype)
    return F.dropout(p, dropout) @ v


class CausalSelfAttention(nn.Module):
    """q/k/v projections, SDPA with the 1/sqrt(d_head) scale (μP: 1/d_head), and out_proj (W_O).

    With `qk_norm`, queries and keys are RMS-normalised per head (one gain of size d_head each, shared
    by the heads; qk_norm_scope=full: over the whole projection, OLMoE's form) before RoPE: the
    logits q·k/√d_h can then no longer grow with the weights' scale.
    With `keep_qk` (telemetry, on its log steps only) the forward also leaves the q and k it gave SDPA
    in `kept_qk`, and its mask in `kept_mask` (the statistics cover only the pairs it attends):
    SDPA saves them for backward anyway, so this costs no memory and no kernel change.
    With n_kv_head < n_head, k and v have n_kv_head heads (k_proj, v_proj: d → n_kv_head·d_head) and
    SDPA's `enable_gqa` lets query head h read key/value head h // (n_head / n_kv_head), without
    materialising the repeated heads; kept k then has n_kv_head heads too.
    With `attn_gate` (Qiu et al. 2025, "Gated Attention for Large Language Models") each head's
    SDPA output is multiplied by sigmoid(x·W_g) before W_O: x is the attention's input (the block's
    normed input under pre-norm), one gate per head (headwise) or per channel (elementwise). With
    `attn_softcap` the logits go through c·tanh(·/c) on the explicit path (`capped_attention`).
    """

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        d = cfg.n_embd
        self.n_head, self.head_dim, self.dropout = cfg.n_head, cfg.head_dim, cfg.dropout
        self.n_kv_head = cfg.kv_heads
        kv = cfg.kv_heads * cfg.head_dim
        self.scale = mup.attn_scale(cfg)  # None: SDPA's 1/sqrt(d_head); μP: 1/d_head (model/mup.py)
        self.q_proj = nn.Linear(d, cfg.n_head * cfg.head_dim, bias=cfg.bias)
        self.k_proj = nn.Linear(d, kv, bias=cfg.bias)
        self.v_proj = nn.Linear(d, kv, bias=cfg.bias)
        self.out_proj = nn.Linear(cfg.n_head * cfg.head_dim, d, bias=cfg.bias)
        # qk_norm_scope=full (OLMoE) normalises the whole q and k projections, before the head split
        self.qk_full = cfg.qk_norm_scope == "full"
        q_width, k_width = (cfg.n_head * cfg.head_dim, kv) if self.qk_full else (cfg.head_dim,) * 2
        self.q_norm = nn.RMSNorm(q_width, eps=cfg.norm_eps) if cfg.qk_norm else None
        self.k_norm = nn.RMSNorm(k_width, eps=cfg.norm_eps) if cfg.qk_norm else None
        gate_width = {"none": 0, "headwise": cfg.n_head, "elementwise": cfg.n_head * cfg.head_dim}[
            cfg.attn_gate
        ]
        self.gate_proj = nn.Linear(d, gate_width, bias=False) if gate_width else None
        self.softcap = cfg.attn_softcap
        self.resid_drop = nn.Dropout(cfg.dropout)
        self.keep_qk = False
        self.kept_qk: tuple[torch.Tensor, torch.Tensor] | None = None
        self.kept_mask: torch.Tensor | None = None  # the mask beside kept_qk (None: causal)
        self.kept_gate: torch.Tensor | None = None  # the gate's values, on the same steps as kept_qk

    def heads(self, proj: nn.Linear, x: torch.Tensor, norm: nn.Module | None = None) -> torch.Tensor:
        """(B, T, C) → (B, H, T, Dh) through one projection (H: its output width / Dh), normed over
        the whole projection first when given `norm` (qk_norm_scope=full)."""
        B, T, _ = x.shape
        y = proj(x) if norm is None else norm(proj(x))
        return y.view(B, T, -1, self.head_dim).transpose(1, 2)

    def queries_keys(
        self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor] | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """q and k as SDPA sees them: QK-norm, then RoPE."""
        if self.qk_full:
            q, k = self.heads(self.q_proj, x, self.q_norm), self.heads(self.k_proj, x, self.k_norm)
        else:
            q, k = self.heads(self.q_proj, x), self.heads(self.k_proj, x)
            if self.q_norm is not None and self.k_norm is not None:
                q, k = self.q_norm(q), self.k_norm(k)
        if rope is not None:  # (≥T, r) tables, or (B, 1, T, r) per-token positions (documents)
            T = x.shape[1]
            cos, sin = rope[0][..., :T, :].to(q.dtype), rope[1][..., :T, :].to(q.dtype)
            q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        return q, k

    def forward(
        self,
        x: torch.Tensor,
        rope: tuple[torch.Tensor, torch.Tensor] | None,
        mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """`mask`: bool, True = attend, (T, T) or (B, 1, T, T) (model/masks.py: a sliding window,
        documents); None = causal, SDPA's `is_causal` (its fused kernels)."""
        B, T, _ = x.shape
        q, k = self.queries_keys(x, rope)
        if self.keep_qk:
            self.kept_qk, self.kept_mask = (q.detach(), k.detach()), mask
        v = self.heads(self.v_proj, x)
        gqa = self.n_kv_head != self.n_head  # SDPA maps query head h to key/value head h // group
        drop = self.dropout if self.training else 0.0
        if self.softcap is None:
            y = F.scaled_dot_product_attention(
                q, k, v, mask, dropout_p=drop, is_causal=mask is None, scale=self.scale, enable_gqa=gqa
            )
        else:
            y = capped_attention(q, k, v, self.softcap, self.scale, drop, mask)
        if self.gate_proj is not None:  # (B, H, T, 1) headwise or (B, H, T, Dh) elementwise
            gate = torch.sigmoid(self.gate_proj(x).view(B, T, self.n_head, -1).transpose(1, 2))
            if self.keep_qk:
                self.kept_gate = gate.detach()
            y = y * gate
        return self.resid_drop(self.out_proj(y.transpose(1, 2).reshape(B, T, -1)))
