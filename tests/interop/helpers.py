"""Interop helpers: tiny models, real Lightning checkpoints, the repo's CLIs loaded in-process."""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import lightning as L
import torch
from torch.utils.data import DataLoader

from gptlab.config import OptimConfig
from gptlab.model import GPT, GPTConfig
from gptlab.training.module import GPTLightningModule

REPO = Path(__file__).resolve().parents[2]
TINY: dict[str, Any] = dict(n_layer=2, n_embd=64, n_head=4, vocab_size=256, block_size=64)
GPT2_SHAPE: dict[str, Any] = dict(norm="layernorm", ffn="gelu_tanh", pos_emb="learned", bias=True)


def load_cli(name: str) -> ModuleType:
    """A repo-root script (generate.py, evaluate.py, scripts/export.py) imported by path."""
    path = REPO / name
    spec = importlib.util.spec_from_file_location(f"gptlab_cli_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the file executes
    spec.loader.exec_module(module)
    return module


def perturbed_gpt(overrides: dict[str, Any] | None = None, seed: int = 0, scale: float = 0.05) -> GPT:
    """A tiny GPT with every parameter moved off its init, so a wrongly loaded tensor shows."""
    torch.manual_seed(seed)
    model = GPT(GPTConfig(**TINY | (overrides or {})))
    with torch.no_grad():
        for p in model.parameters():
            p.add_(scale * torch.randn_like(p))
    return model.eval()


def train_lightning_checkpoint(
    path: Path, model_cfg: GPTConfig, tokenizer: dict[str, Any], steps: int = 2
) -> Path:
    """A checkpoint written by a real Trainer around the project's LightningModule."""
    module = GPTLightningModule(
        model=model_cfg.to_dict(),
        optim=dataclasses.asdict(OptimConfig(warmup_steps=0)),
        tokenizer=tokenizer,
    )
    g = torch.Generator().manual_seed(0)
    batches = torch.randint(0, model_cfg.vocab_size, (4 * steps, model_cfg.block_size + 1), generator=g)
    trainer = L.Trainer(
        max_steps=steps,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=path.parent,
    )
    trainer.fit(module, DataLoader(batches, batch_size=4))
    trainer.save_checkpoint(path)
    return path
