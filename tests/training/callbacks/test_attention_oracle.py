"""Attention-logit, entropy, sink, gate, output-logit and update-RMS telemetry against plain torch.

The reference recomputes every block's queries and keys from the weights themselves (its own RMSNorm,
its own half-split RoPE, its own per-head QK-norm), in float64, at on_train_batch_start (the weights
the step's forward uses) on the step's batch; nothing of LayerTelemetry or CausalSelfAttention is
called for it. Only the residual stream is advanced with the model's
own blocks (the stream is not what is under test here; act_rms is checked in tests/oracle).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import lightning as L
import pytest
import torch
from torch.utils.data import DataLoader

from gptlab.config import OptimConfig
from gptlab.model import GPTConfig
from gptlab.training.callbacks.telemetry import LayerTelemetry
from gptlab.training.module import GPTLightningModule

REL = 1e-4


def rms(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight.double()


def rotate(x: torch.Tensor, theta: float, fraction: float = 1.0) -> torch.Tensor:
    """RoPE, half-split pairs (i, i + D/2) rotated by angle pos · theta^(-2i/D), D the rotated width
    fraction·d_head: the first D dims of each head, the others as they are."""
    D = round(fraction * x.shape[-1])
    if D < x.shape[-1]:
        return torch.cat([rotate(x[..., :D], theta), x[..., D:]], dim=-1)
    T = x.shape[-2]
    freq = theta ** (-torch.arange(0, D // 2, dtype=torch.float64) * 2 / D)
    ang = torch.arange(T, dtype=torch.float64)[:, None] * freq[None, :]
    cos, sin = ang.cos(), ang.sin()
    a, b = x[..., : D // 2], x[..., D // 2 :]
    return torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1)


def attended(cfg: GPTConfig, i: int, idx: torch.Tensor, eot: int | None) -> torch.Tensor:
    """(B, 1, T, T) bool, the pairs block i attends, by the definitions: key j <= query i; in a local
    layer (model.window_pattern's letter S, every layer without a pattern) i - j < model.window;
    with documents (an eot opens one) j and i in the same document."""
    B, T = idx.shape
    letter = "S" if cfg.window_pattern is None else cfg.window_pattern[i % len(cfg.window_pattern)]
    window = cfg.window if letter == "S" else None
    m = torch.zeros(B, 1, T, T, dtype=torch.bool)
    for b in range(B):
        doc = [0] * T
        for t in range(T):
            doc[t] = (doc[t - 1] if t else 0) + int(eot is not None and int(idx[b, t]) == eot)
        for q in range(T):
            for j in range(q + 1):
                m[b, 0, q, j] = (window is None or q - j < window) and doc[q] == doc[j]
    return m


@torch.no_grad()
def reference(model: Any, idx: torch.Tensor) -> dict[str, float]:
    """attn_logit_max/attn_entropy/attn_sink (and attn_gate) per block and logits/* from the
    weights, in float64; soft caps c·tanh(x/c) where configured (the logits the softmax sees);
    over the pairs each block attends (`attended`: causal, its window, its documents)."""
    cfg = model.cfg
    B, T = idx.shape
    eot = model.documents.eot if model.documents is not None else None
    assert model.documents is None or model.documents.positions == "continue"  # rotate: 0..T-1
    H, D = cfg.n_head, cfg.n_embd // cfg.n_head
    Hkv = cfg.n_kv_head or H  # grouped-query: key head j serves query heads j·H/Hkv ... (j+1)·H/Hkv - 1
    x = model.tok_emb.weight[idx]
    if model.pos_emb is not None:
        x = x + model.pos_emb.weight[:T]
    rope = (model.rope_cos, model.rope_sin) if cfg.pos_emb == "rope" else None
    out: dict[str, float] = {}
    for i, block in enumerate(model.blocks):
        seen = attended(cfg, i, idx, eot)
        h = x.double()
        if cfg.norm_placement in ("pre", "sandwich"):
            assert cfg.norm == "rmsnorm"
            h = rms(h, block.attn_norm.weight, cfg.norm_eps)
        attn = block.attn
        q = (h @ attn.q_proj.weight.double().T).view(B, T, H, D).transpose(1, 2)
        k = (h @ attn.k_proj.weight.double().T).view(B, T, Hkv, D).transpose(1, 2)
        k = k.repeat_interleave(H // Hkv, dim=1)
        if cfg.qk_norm:
            q, k = rms(q, attn.q_norm.weight, cfg.norm_eps), rms(k, attn.k_norm.weight, cfg.norm_eps)
        if cfg.pos_emb == "rope" and not (cfg.nope_every and (i + 1) % cfg.nope_every == 0):
            q, k = rotate(q, cfg.rope_theta, cfg.rope_fraction), rotate(k, cfg.rope_theta, cfg.rope_fraction)
        # μP (issue 32): q·k × sqrt(d_h0)/d_h, d_h0 the base width's head width (docs/mup.md)
        scale = math.sqrt(cfg.mup_base_width // H) / D if cfg.parametrization == "mup" else 1 / math.sqrt(D)
        s = (q @ k.transpose(-1, -2)) * scale
        if cfg.attn_softcap:
            s = cfg.attn_softcap * torch.tanh(s / cfg.attn_softcap)
        out[f"attn_logit_max/block_{i:02d}"] = float(s.masked_fill(~seen, -math.inf).max())
        p = torch.softmax(s.masked_fill(~seen, float("-inf")), dim=-1)
        plogp = torch.where(seen, p * torch.log(p.clamp_min(1e-300)), torch.zeros(()))
        out[f"attn_entropy/block_{i:02d}"] = float(-plogp.sum(-1).mean())
        out[f"attn_sink/block_{i:02d}"] = float(p[:, :, 1:, 0].mean())  # rows t >= 1, mass on key 0
        if cfg.attn_gate != "none":
            out[f"attn_gate/block_{i:02d}"] = float(
                torch.sigmoid(h @ attn.gate_proj.weight.double().T).mean()
            )
        x = block(x, rope if cfg.rotates(i) else None, seen)
    if cfg.logit_softcap:  # pre-norm, tied: the head written out, then the cap
        assert cfg.norm_placement == "pre" and cfg.tie_embeddings
        raw = rms(x.double(), model.final_norm.weight, cfg.norm_eps) @ model.tok_emb.weight.double().T
        logits = cfg.logit_softcap * torch.tanh(raw / cfg.logit_softcap)
    else:
        logits = model(idx).double()
    out["logits/mean"] = float(logits.mean())
    out["logits/std"] = float(logits.std(unbiased=False))
    out["logits/max"] = float(logits.max())
    top = logits.max(-1, keepdim=True).values
    out["logits/log_z_mean"] = float((top.squeeze(-1) + (logits - top).exp().sum(-1).log()).mean())
    return out


class Reference(L.Callback):
    """The reference numbers of each step, plus ‖ΔW‖/√n per block around the optimizer step."""

    def __init__(self) -> None:
        self.steps: list[dict[str, float]] = []
        self._before: dict[str, torch.Tensor] = {}

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: Any, batch: Any, batch_idx: int) -> None:
        self.steps.append(reference(pl_module.model, batch[:, :-1]))

    def on_before_optimizer_step(self, trainer: L.Trainer, pl_module: Any, optimizer: Any) -> None:
        self._before = {n: p.detach().double().clone() for n, p in pl_module.model.named_parameters()}

    def on_train_batch_end(
        self, trainer: L.Trainer, pl_module: Any, outputs: Any, batch: Any, i: int
    ) -> None:
        sq: dict[str, float] = {}
        count: dict[str, int] = {}
        for n, p in pl_module.model.named_parameters():
            if n.startswith("blocks."):
                b = f"block_{int(n.split('.')[1]):02d}"
                sq[b] = sq.get(b, 0.0) + float((p.detach().double() - self._before[n]).pow(2).sum())
                count[b] = count.get(b, 0) + p.numel()
        self.steps[-1].update({f"update_rms/{b}": math.sqrt(v / count[b]) for b, v in sq.items()})


def train(
    steps: int,
    scale: tuple[int | None, float] | None = None,
    documents: dict[str, Any] | None = None,
    **model: Any,
) -> tuple[list, list]:
    L.seed_everything(0, verbose=False)
    base = {"vocab_size": 64, "block_size": 16, "n_layer": 3, "n_head": 2, "n_embd": 32}
    cfg = GPTConfig(**{**base, **model})
    module = GPTLightningModule(
        model=dataclasses.asdict(cfg),
        optim=dataclasses.asdict(OptimConfig(lr=1e-2, warmup_steps=1)),
        documents=documents,
    )
    if scale is not None:
        block, factor = scale
        with torch.no_grad():
            for i, b in enumerate(module.model.blocks):
                if block is None or i == block:
                    b.attn.q_proj.weight.mul_(factor)
                    b.attn.k_proj.weight.mul_(factor)
    telemetry, ref = LayerTelemetry(every=1, figures=False), Reference()
    data = torch.randint(0, 64, (steps * 4, 17), generator=torch.Generator().manual_seed(0))
    if documents is not None:  # documents of 1 to 9 tokens, one window opened by an eot
        data[data == documents["eot"]] = 0
        data[0::2, [3, 7, 8]] = data[1::2, [0, 10]] = documents["eot"]
    trainer = L.Trainer(
        accelerator="cpu",
        max_steps=steps,
        log_every_n_steps=1,
        logger=False,
        callbacks=[telemetry, ref],
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        limit_val_batches=0,
        num_sanity_val_steps=0,
    )
    trainer.fit(module, train_dataloaders=DataLoader(list(data), batch_size=4))
    return telemetry.history, ref.steps


@pytest.mark.parametrize(
    "model",
    [
        {},
        {"qk_norm": True},
        {"norm_placement": "post", "pos_emb": "learned"},
        {"parametrization": "mup", "mup_base_width": 16},
        {"n_head": 4, "n_kv_head": 2, "qk_norm": True},
        {"attn_gate": "headwise"},
        {"attn_gate": "elementwise", "n_head": 4, "n_kv_head": 2},
        {"rope_fraction": 0.5, "nope_every": 2},
        {"pos_emb": "none"},
        {"attn_softcap": 2.0, "logit_softcap": 1.5, "n_head": 4, "n_kv_head": 1},
    ],
    ids=[
        "pre-rope",
        "pre-rope-qknorm",
        "post-learned",
        "mup",
        "gqa",
        "gate-head",
        "gate-elem",
        "partial-nope",
        "no-pos",
        "softcaps",
    ],  # fmt: skip
)
def test_attention_and_logit_telemetry_equal_plain_torch(model: dict[str, Any]) -> None:
    # q and k of every block x8: peaked attention (logits of order 1-10, not ~0.05), so that an
    # entropy over the wrong axis or a missing scale cannot pass for the right one
    history, ref = train(3, scale=(None, 8.0), **model)
    assert len(history) == len(ref) == 3
    for (step, logged), want in zip(history, ref, strict=True):
        assert set(want) <= set(logged), sorted(set(want) - set(logged))
        for key, value in want.items():
            assert logged[key] == pytest.approx(value, rel=REL, abs=1e-7), (step, key, logged[key], value)


@pytest.mark.parametrize("qk_norm", [False, True], ids=["plain", "qk_norm"])
def test_scaled_qk_raises_that_blocks_logit_max_unless_qk_norm(qk_norm: bool) -> None:
    """q and k of block 1 times 4: its logits grow 16x; with QK-norm they do not move at all."""
    plain = train(1, n_layer=4, qk_norm=qk_norm)[0][0][1]
    scaled = train(1, scale=(1, 4.0), n_layer=4, qk_norm=qk_norm)[0][0][1]
    blocks = [f"block_{i:02d}" for i in range(4)]
    ratio = {b: scaled[f"attn_logit_max/{b}"] / plain[f"attn_logit_max/{b}"] for b in blocks}
    if not qk_norm:
        assert max(ratio, key=ratio.get) == "block_01", ratio
        assert ratio["block_01"] > 8, ratio
        assert all(r < 2 for b, r in ratio.items() if b != "block_01"), ratio
    else:
        assert all(r == pytest.approx(1.0, rel=1e-3) for r in ratio.values()), ratio


@pytest.mark.parametrize(
    ("model", "documents"),
    # the statistics' own mask arithmetic (windows, documents, grouped heads, caps) is checked on
    # hand-made q, k and masks in test_telemetry_cost.py; these two runs check that each layer hands
    # over the mask it attended with (a local and a global layer, documents on top)
    [
        ({"window": 4, "n_head": 4, "n_kv_head": 2, "attn_softcap": 2.0}, None),
        (
            {"window": 3, "window_pattern": "LS", "n_head": 4, "n_kv_head": 1},
            {"eot": 5, "positions": "continue"},
        ),
    ],
    ids=["window-gqa-softcap", "window-documents-mqa"],
)
def test_attention_telemetry_covers_only_the_attended_pairs(
    model: dict[str, Any], documents: dict[str, Any] | None
) -> None:
    """model.window and data.document_mask: the layer attends to fewer keys than causal attention,
    so its max logit, entropy and sink are those of the masked softmax (a causal-only statistic
    counts the logits and mass of keys the layer never reads)."""
    history, ref = train(2, scale=(None, 8.0), documents=documents, **model)
    for (step, logged), want in zip(history, ref, strict=True):
        for key, value in want.items():
            if key.startswith("attn_"):
                assert logged[key] == pytest.approx(value, rel=REL, abs=1e-7), (step, key, logged[key], value)
