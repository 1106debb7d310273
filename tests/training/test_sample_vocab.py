"""A model whose vocabulary is larger than its tokenizer's (model.vocab_size=300 on bytes, as after
init_from of a bigger vocabulary) trains, samples and generates: only ids the tokenizer can decode are
drawn, and a sample that fails after training is a warning, never a failed run."""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path

import pytest
import torch

from gptlab.compose import compose_config
from gptlab.data.datamodule import TokenDataModule
from gptlab.generation import GenerateConfig, generate, sample_tokens
from gptlab.training.app import model_config, safe_sample
from gptlab.training.module import GPTLightningModule
from tests.training.rel_harness import train_here

BYTES = 256  # the byte tokenizer's size


def _setup(tmp_path: Path, *overrides: str) -> tuple:
    cfg = compose_config([
        "model.n_layer=1", "model.n_embd=32", "model.n_head=2", "model.block_size=32",
        "data.max_bytes=60000", f"data.cache_dir={tmp_path}", "sample.max_new_tokens=12",
        "model.vocab_size=300", *overrides,
    ])  # fmt: skip
    dm = TokenDataModule(cfg.data, block_size=cfg.model.block_size, seed=cfg.seed)
    dm.prepare()
    dm.setup("fit")
    model = model_config(cfg, dm.vocab_size, dm.tokenizer)
    module = GPTLightningModule(model=dataclasses.asdict(model), optim=dataclasses.asdict(cfg.optim))
    return cfg, module, dm


def favour_undecodable(module: GPTLightningModule) -> None:
    """Make the ids past the tokenizer the model's likeliest, so an unmasked sample draws them."""
    with torch.no_grad():
        module.model.lm_head.weight[BYTES:] = 0.0
    bonus = (torch.arange(module.model.cfg.vocab_size) >= BYTES) * 50.0
    module.model.register_forward_hook(lambda _m, _i, out: out + bonus)


def test_sampled_ids_are_all_ones_the_tokenizer_decodes(tmp_path: Path) -> None:
    cfg, module, dm = _setup(tmp_path)
    assert module.model.cfg.vocab_size == 300 and dm.tokenizer.vocab_size == BYTES
    favour_undecodable(module)
    prompt = list(dm.tokenizer.encode("def "))
    for temperature, top_k in ((1.0, None), (0.0, None), (2.0, 50)):
        free = list(sample_tokens(module.model, prompt, 12, temperature, top_k))
        assert max(free) >= BYTES  # the oracle bites: unmasked, the model draws undecodable ids
        ids = list(sample_tokens(module.model, prompt, 12, temperature, top_k, decodable=BYTES))
        assert len(ids) == 12 and max(ids) < BYTES, (temperature, ids)
        dm.tokenizer.decode(ids)  # decodes without error


def test_a_failing_sample_after_training_is_a_warning(tmp_path: Path, caplog) -> None:
    cfg, module, dm = _setup(tmp_path)
    with torch.no_grad():
        module.model.lm_head.weight.fill_(float("nan"))  # softmax over NaN: multinomial raises
    with caplog.at_level("WARNING", logger="gptlab"):
        sample, error = safe_sample(cfg, module, dm)
    assert sample == "" and "probability tensor" in error["sample_error"]
    assert "the end-of-run sample failed" in caplog.text


@pytest.mark.slow
def test_a_larger_vocabulary_trains_samples_and_generates(tmp_path: Path, cache: Path) -> None:
    """train.py model.vocab_size=300 trainer.max_steps=1 finishes with a sample; generate.py on its
    checkpoint streams text. 64 new tokens of a one-step model: about 1 in 7 of its draws would be an
    undecodable id were they not masked, so an unmasked sample fails all but surely."""
    run = tmp_path / "run"
    result = train_here(run, cache, "model.vocab_size=300", "trainer.max_steps=1", "sample.max_new_tokens=64")
    assert result["status"] == "finished" and "sample_error" not in result
    assert len(result["sample"]) > 0
    out = io.StringIO()
    ckpt = str(run / "checkpoints" / "last.ckpt")
    settings = GenerateConfig(ckpt_path=ckpt, prompt="def ", max_new_tokens=64, temperature=1.0, top_k=None)
    generate(settings, out)
    assert out.getvalue().startswith("def ") and len(out.getvalue()) > len("def ")
