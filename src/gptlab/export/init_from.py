"""model.init_from: train from a HF checkpoint, after checking it fits the model about to train."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import torch

from gptlab.export.reader import load_hf, load_hf_config
from gptlab.export.targets import ATTENTION_OFF
from gptlab.model.config import GPTConfig
from gptlab.model.gpt import GPT

# Fields that must agree between a model and a checkpoint it is initialised from.
_ARCH_FIELDS = (
    "vocab_size",
    "n_layer",
    "n_head",
    "n_embd",
    "norm",
    "norm_placement",
    "ffn",
    "tie_embeddings",
    "pos_emb",
    "bias",
    "qk_norm",
    "qk_norm_scope",
    "attn_head_dim",
    "attn_softcap",  # Gemma 2's caps (export/gemma2.py)
    "logit_softcap",
)
# model.moe.* fields that shape the function (must agree), and those that only train it, which
# init_config takes from model.moe.* when model/ffn=moe is given (else from config.json and defaults)
MOE_ARCH_FIELDS = (
    "n_experts",
    "top_k",
    "expert_ffn",
    "n_shared",
    "router",
    "norm_topk",
    "first_dense_layers",
)
MOE_TRAINING_FIELDS = (
    "balance",
    "aux_loss_coef",
    "bias_update_rate",
    "router_z_loss",
    "capacity_factor",
    "impl",
)


def init_config(path: str | Path, base: GPTConfig, vocab_size: int | None = None) -> GPTConfig:
    """The config to train from a HF checkpoint: its architecture, `base`'s context, dropout and
    activation checkpointing.

    The checkpoint's embeddings are never resized, so its vocabulary must already hold every id of
    the tokenizer (`vocab_size`); a larger one is fine (the extra rows are never indexed).
    """
    hf_cfg = load_hf_config(path)
    if base.qk_norm and not hf_cfg.qk_norm:  # training the checkpoint with a q/k norm is a new model
        raise ValueError(
            f"model.qk_norm=True cannot start from model.init_from={str(path)!r}: its attention has no "
            "query/key norm (Llama, GPT-2 and Mixtral checkpoints have none); accepted: "
            "model.qk_norm=false with model.init_from"
        )
    if base.norm == "dyt":  # the checkpoint's norms are RMSNorm or LayerNorm: DyT is a new model
        raise ValueError(
            f"model.norm='dyt' cannot start from model.init_from={str(path)!r}: Llama and GPT-2 "
            "checkpoints normalise (RMSNorm, LayerNorm) and hold no DyT α; accepted: model.norm=rmsnorm "
            "or layernorm with model.init_from"
        )
    if vocab_size is not None and hf_cfg.vocab_size < vocab_size:
        raise ValueError(
            f"model.init_from={str(path)!r} has vocab_size={hf_cfg.vocab_size}, fewer than the "
            f"{vocab_size} ids of the data's tokenizer; a checkpoint's embeddings are never "
            "resized: train with the tokenizer it was trained with (data.tokenizer=pretrained "
            f"data.tokenizer_path=<its tokenizer.json>) or one of at most {hf_cfg.vocab_size} ids"
        )
    if hf_cfg.pos_emb == "learned" and base.block_size > hf_cfg.block_size:
        raise ValueError(
            f"model.block_size={base.block_size} exceeds the {hf_cfg.block_size} learned "
            f"positions of model.init_from={str(path)!r}; accepted: 1..{hf_cfg.block_size}"
        )
    if base.uses_mup and (
        base.mup_base_width != hf_cfg.n_embd or base.mup_base_head_dim not in (None, hf_cfg.head_dim)
    ):
        raise ValueError(
            f"model.init_from={str(path)!r} holds a model of n_embd={hf_cfg.n_embd} (head width "
            f"{hf_cfg.head_dim}), which is μP's function only at its base width; got "
            f"model.mup_base_width={base.mup_base_width}, mup_base_head_dim={base.mup_base_head_dim}; "
            f"accepted: mup_base_width={hf_cfg.n_embd} (mup_base_head_dim null), or parametrization=sp"
        )
    if base.parametrization == "completep" and base.mup_base_depth != hf_cfg.n_layer:
        raise ValueError(
            f"model.init_from={str(path)!r} holds a model of n_layer={hf_cfg.n_layer}, which is "
            f"CompleteP's function only at its base depth; got model.mup_base_depth={base.mup_base_depth}; "
            f"accepted: mup_base_depth={hf_cfg.n_layer}, or parametrization=sp or mup"
        )
    switched = [  # an attention switch the user turned on, which the checkpoint does not have
        f"model.{f}={getattr(base, f)!r} (checkpoint: {getattr(hf_cfg, f)!r})"
        for f, (off, _) in ATTENTION_OFF.items()
        if getattr(base, f) != off and getattr(base, f) != getattr(hf_cfg, f)
    ]
    if switched:  # init_config takes the checkpoint's architecture: these would be dropped silently
        raise ValueError(
            f"cannot start from model.init_from={str(path)!r} with {'; '.join(switched)}: a model "
            "initialised from a checkpoint has the checkpoint's attention; accepted: these fields "
            "left at their defaults (the checkpoint's values are used) or equal to the checkpoint's"
        )
    moe = hf_cfg.moe
    given = base.ffn == "moe" and base.moe is not None  # model/ffn=moe given: its training terms train it
    if moe is not None and given:
        moe = replace(moe, **{f: getattr(base.moe, f) for f in MOE_TRAINING_FIELDS})
    return replace(
        hf_cfg,
        moe=moe,
        block_size=base.block_size,
        dropout=base.dropout,
        init_from=str(path),
        activation_checkpointing=base.activation_checkpointing,
        activation_checkpointing_every=base.activation_checkpointing_every,
        # μP is kept, at the checkpoint's width as its base (checked above; μP is SP there)
        parametrization=base.parametrization,
        mup_base_width=base.mup_base_width,
        mup_base_head_dim=base.mup_base_head_dim,
        mup_base_depth=base.mup_base_depth,
    )


def init_from_hf(model: GPT, path: str | Path) -> None:
    """Copy a HF checkpoint's weights into `model` after checking their architectures agree."""
    ckpt_cfg = load_hf_config(path)  # check before reading possibly large weights
    cfg = model.cfg
    wrong = [
        f"model.{f}={getattr(cfg, f)!r} (checkpoint: {getattr(ckpt_cfg, f)!r})"
        for f in _ARCH_FIELDS
        if getattr(cfg, f) != getattr(ckpt_cfg, f) and (f != "qk_norm_scope" or cfg.qk_norm)
    ]
    windows = [[c.window_at(i) for i in range(c.n_layer)] for c in (cfg, ckpt_cfg)]
    if windows[0] != windows[1]:  # compared per layer: patterns SL and SLSL are the same 4 layers
        wrong.append(f"the layers' windows {windows[0]} (checkpoint: {windows[1]})")
    if cfg.kv_heads != ckpt_cfg.kv_heads:  # null and n_head are the same multi-head attention
        wrong.append(
            f"model.n_kv_head={cfg.n_kv_head!r} gives {cfg.kv_heads} key/value heads "
            f"(checkpoint: {ckpt_cfg.kv_heads})"
        )
    if cfg.moe is not None and ckpt_cfg.moe is not None:
        wrong += [
            f"model.moe.{f}={getattr(cfg.moe, f)!r} (checkpoint: {getattr(ckpt_cfg.moe, f)!r})"
            for f in MOE_ARCH_FIELDS
            if getattr(cfg.moe, f) != getattr(ckpt_cfg.moe, f)
        ]
        if cfg.expert_hidden != ckpt_cfg.expert_hidden:
            wrong.append(
                f"model.moe.expert_hidden={cfg.moe.expert_hidden!r} gives width {cfg.expert_hidden} "
                f"(checkpoint: {ckpt_cfg.expert_hidden})"
            )
    dense = [c.ffn != "moe" or (c.moe is not None and c.moe.first_dense_layers > 0) for c in (cfg, ckpt_cfg)]
    if any(dense) and cfg.hidden_dim != ckpt_cfg.hidden_dim:
        wrong.append(
            f"model.ffn_hidden={cfg.ffn_hidden!r} gives width {cfg.hidden_dim} "
            f"(checkpoint: {ckpt_cfg.hidden_dim})"
        )
    if not math.isclose(cfg.norm_eps, ckpt_cfg.norm_eps, rel_tol=1e-6):
        wrong.append(f"model.norm_eps={cfg.norm_eps!r} (checkpoint: {ckpt_cfg.norm_eps!r})")
    if cfg.pos_emb == ckpt_cfg.pos_emb == "rope" and not math.isclose(
        cfg.rope_theta, ckpt_cfg.rope_theta, rel_tol=1e-6
    ):
        wrong.append(f"model.rope_theta={cfg.rope_theta!r} (checkpoint: {ckpt_cfg.rope_theta!r})")
    if cfg.pos_emb == ckpt_cfg.pos_emb == "learned" and cfg.block_size > ckpt_cfg.block_size:
        wrong.append(
            f"model.block_size={cfg.block_size} exceeds the checkpoint's {ckpt_cfg.block_size} "
            "learned positions"
        )
    if wrong:
        raise ValueError(
            f"cannot initialise from {path}: {'; '.join(wrong)}; "
            "set these model fields to the checkpoint's values"
        )
    _, state = load_hf(path)
    if cfg.pos_emb == "learned":
        state["pos_emb.weight"] = state["pos_emb.weight"][: cfg.block_size]  # a shorter context
    with torch.no_grad():
        model.load_state_dict(state, strict=True)
