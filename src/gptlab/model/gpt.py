"""The GPT: embeddings → blocks → (final norm) → lm_head, with tying kept intact through moves."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from gptlab.model import moe, mup
from gptlab.model.attention import rope_tables, softcap
from gptlab.model.block import Block
from gptlab.model.config import GPTConfig
from gptlab.model.init import init_weights
from gptlab.model.masks import Documents, MaskCache, Packed, same_document
from gptlab.model.norms import make_norm


class GPT(nn.Module):
    """Decoder-only transformer; `forward(idx)` returns logits of shape (B, T, vocab_size)."""

    def __init__(self, cfg: GPTConfig, documents: Documents | None = None) -> None:
        super().__init__()
        self.cfg = cfg
        # data.document_mask: attention does not cross an end-of-text id (model/masks.py); it is the
        # data's property, kept beside the model so every caller (train, val, evaluate) masks alike
        self.documents = documents
        self.masks = MaskCache()  # model.window's (T, T) masks, one per window width
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.pos_emb = nn.Embedding(cfg.block_size, cfg.n_embd) if cfg.pos_emb == "learned" else None
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList(Block(cfg, i) for i in range(cfg.n_layer))
        # post and deepnorm end on a norm already; pre and sandwich leave the stream unnormalised
        has_final_norm = cfg.norm_placement in ("pre", "sandwich")
        self.final_norm = make_norm(cfg) if has_final_norm else None
        self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        self.logit_mult = mup.logit_mult(cfg)  # μP's output multiplier 1/m; 1 under SP (model/mup.py)
        if cfg.pos_emb == "rope":
            cos, sin = rope_tables(cfg.rope_dims, cfg.block_size, cfg.rope_theta)
            self.register_buffer("rope_cos", cos, persistent=False)
            self.register_buffer("rope_sin", sin, persistent=False)
        # Telemetry's reader of the residual stream, set on its log steps only: called with (i, x, rope)
        # before block i and (n_layer, x, rope) after the last. It runs here, in the eager loop, not in a
        # hook on a block: a compiled block would trace a hook and recompile for each new one.
        self.tap: Callable[[int, torch.Tensor, Any], None] | None = None
        self.reset_parameters()

    def _tie(self) -> None:
        if self.cfg.tie_embeddings:
            self.lm_head.weight = self.tok_emb.weight

    def _apply(self, fn, recurse: bool = True):  # type: ignore[override]
        # .to(), .to_empty(), .half() may replace each module's parameters separately; re-tie after.
        super()._apply(fn, recurse)
        self._tie()
        return self

    def reset_parameters(self) -> None:
        """(Re-)apply the init recipe; also after meta-device construction and `to_empty()`."""
        self._tie()
        if self.cfg.pos_emb == "rope":
            cos, sin = rope_tables(self.cfg.rope_dims, self.cfg.block_size, self.cfg.rope_theta)
            self.rope_cos.copy_(cos)
            self.rope_sin.copy_(sin)
        init_weights(self, self.cfg)

    def forward(self, idx: torch.Tensor, packed: Packed | None = None) -> torch.Tensor:
        """Logits of each token of `idx`; with `packed`, of a row of sequences packed as a tree
        (model/masks.py: each token gets its own sequence's positions and masks), which may be
        longer than block_size while no sequence in it is."""
        T = idx.shape[1]
        doc = self.documents
        if packed is None:
            if T > self.cfg.block_size:
                raise ValueError(f"sequence length {T} exceeds model.block_size={self.cfg.block_size}")
            pos = doc.position_ids(idx) if doc is not None else None  # None: positions 0..T-1
        else:
            pos = packed.positions(idx, doc)
            if T and int(packed.order.max()) >= self.cfg.block_size:
                raise ValueError(f"a packed sequence exceeds model.block_size={self.cfg.block_size}")
        x = self.tok_emb(idx)
        if self.pos_emb is not None:
            x = x + self.pos_emb(torch.arange(T, device=idx.device) if pos is None else pos)
        x = self.drop(x)
        rope = None
        if self.cfg.pos_emb == "rope":
            rope = (self.rope_cos[:T], self.rope_sin[:T])
            if pos is not None:  # each token's own angle: (B, 1, T, r), broadcast over the heads
                rope = (self.rope_cos[pos][:, None], self.rope_sin[pos][:, None])
        windows = {self.cfg.window_at(i) for i in range(len(self.blocks))}
        if packed is None:
            same = same_document(doc.ids(idx)) if doc is not None else None
            masks = {w: self._mask(T, w, same, idx.device) for w in windows}
        else:
            masks = {w: packed.mask(w, idx, doc) for w in windows}
        for i, block in enumerate(self.blocks):
            rope_i = rope if self.cfg.rotates(i) else None  # model.nope_every: this layer is NoPE
            mask = masks[self.cfg.window_at(i)]  # model.window_pattern: this layer's window or None
            if self.tap is not None:  # outside the checkpointed call: backward never re-runs it
                self.tap(i, x, rope)
            if self.cfg.checkpoints(i) and torch.is_grad_enabled():
                # keep only x; backward re-runs the block, replaying the RNG (dropout masks)
                x = checkpoint(block, x, rope_i, mask, use_reentrant=False)
            else:
                x = block(x, rope_i, mask)
        if self.tap is not None:
            self.tap(len(self.blocks), x, rope)
        if self.final_norm is not None:
            x = self.final_norm(x)
        logits = self.lm_head(x)
        logits = logits if self.logit_mult == 1.0 else logits * self.logit_mult
        return logits if self.cfg.logit_softcap is None else softcap(logits, self.cfg.logit_softcap)

    def _mask(
        self, T: int, window: int | None, same: torch.Tensor | None, device: torch.device
    ) -> torch.Tensor | None:
        """A layer's attention mask: None (causal, SDPA's fused path) for a global layer or a window
        of at least T; the cached (T, T) window; and with documents, that AND the same-document
        (B, 1, T, T) mask."""
        local = None if window is None or window >= T else self.masks.get(T, window, device)
        if same is None:
            return local
        return same & (local if local is not None else self.masks.get(T, T, device))

    def num_params(self, exclude_embedding: bool = False) -> int:
        """Unique parameters (a tied matrix once). `exclude_embedding` drops the lookup tables
        (pos_emb, and tok_emb unless it is also the tied head): the N of the 6·N FLOP rule."""
        n = sum(p.numel() for p in self.parameters())
        if exclude_embedding:
            if self.pos_emb is not None:
                n -= self.pos_emb.weight.numel()
            if not self.cfg.tie_embeddings:
                n -= self.tok_emb.weight.numel()
        return n

    def flops_per_token(self, seq_len: int | None = None) -> int:
        """Training FLOPs per token, 6·N + 12·d·Σ_layers keys (PaLM appendix B; nanoGPT's
        estimate_mfu): N the active parameters (under ffn=moe top_k of the experts); a global layer
        counts T keys a query (the full square, as PaLM and the dense kernel do), a local layer
        min(window, T) (the band a window kernel computes). Document masks are not counted: their
        sparsity depends on the data."""
        T = seq_len or self.cfg.block_size
        active = self.num_params(exclude_embedding=True) - moe.inactive_params(self)
        keys = sum(T if w is None else min(w, T) for w in map(self.cfg.window_at, range(self.cfg.n_layer)))
        return 6 * active + 12 * keys * self.cfg.n_embd
