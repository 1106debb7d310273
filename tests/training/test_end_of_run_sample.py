"""The end-of-run sample starts from `sample.prompt` when one is given, else from the start of a
validation document (the default: it fits any dataset)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from gptlab.compose import compose_config
from gptlab.data.datamodule import TokenDataModule
from gptlab.training.app import generate_sample, model_config
from gptlab.training.module import GPTLightningModule


def _setup(tmp_path: Path, *overrides: str) -> tuple:
    cfg = compose_config([
        "model.n_layer=1", "model.n_embd=32", "model.n_head=2", "model.block_size=32",
        "data.max_bytes=200000", f"data.cache_dir={tmp_path}", "sample.max_new_tokens=7", *overrides,
    ])  # fmt: skip
    dm = TokenDataModule(cfg.data, block_size=cfg.model.block_size, seed=cfg.seed)
    dm.prepare()
    dm.setup("fit")
    model = model_config(cfg, dm.vocab_size, dm.tokenizer)
    module = GPTLightningModule(model=dataclasses.asdict(model), optim=dataclasses.asdict(cfg.optim))
    return cfg, module, dm


def test_sample_uses_the_configured_prompt(tmp_path: Path) -> None:
    cfg, module, dm = _setup(tmp_path, "sample.prompt='import os'")
    text = generate_sample(cfg, module, dm)
    assert text.startswith("import os") and not text.startswith(dm.tokenizer.decode(dm.sample_prompt()))
    assert len(dm.tokenizer.encode(text)) >= len("import os") + 1


def test_sample_without_prompt_starts_a_validation_document(tmp_path: Path) -> None:
    cfg, module, dm = _setup(tmp_path)
    assert cfg.sample.prompt is None
    assert generate_sample(cfg, module, dm).startswith(dm.tokenizer.decode(dm.sample_prompt()))
