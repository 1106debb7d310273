"""model.init_from=<HF dir>: train.py starts from exactly the exported model; evaluate.py agrees."""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from gptlab.checkpoints import load_gpt
from gptlab.config import TrainConfig
from gptlab.data.config import DataConfig
from gptlab.data.packing import prepare_tokens
from gptlab.data.tokenizers import BPETokenizer, ByteTokenizer
from gptlab.export import export_hf, gpt_from_hf
from gptlab.model import GPT, GPTConfig
from gptlab.training.app import model_config
from tests.interop.helpers import GPT2_SHAPE, TINY, load_cli, perturbed_gpt

EVALUATE = load_cli("evaluate.py")
MAX_BYTES = 120_000
BATCH = 4
VAL_WINDOWS = "data.val_windows=0"  # every val window: the oracle below needs no subset rule


def val_loss(model: GPT, cache: Path) -> float:
    """Mean loss of `model` on every val window (block_size+1 tokens), read from the token file."""
    packed = prepare_tokens(DataConfig(max_bytes=MAX_BYTES, cache_dir=str(cache)))
    bs = model.cfg.block_size
    tokens = torch.from_numpy(np.asarray(packed.tokens("val"), dtype=np.int64))
    n = (len(tokens) - 1) // bs
    windows = torch.stack([tokens[k * bs : (k + 1) * bs + 1] for k in range(n)])
    with torch.no_grad():
        logits = model.eval()(windows[:, :-1])
    return F.cross_entropy(logits.flatten(0, 1), windows[:, 1:].flatten()).item()


def train(run_dir: Path, cache: Path, *overrides: str) -> dict[str, Any]:
    """A tiny run, two steps at a negligible learning rate, validation at the end: train.py's config
    and its app.train in this process (tests/training/rel_harness.py; nothing here is about the command
    line, and model.init_from is read in app.train); returns what metrics.json holds."""
    from gptlab.training.app import train as train_app
    from gptlab.training.app import validate
    from tests.training.rel_harness import compose_cfg

    args = [
        "model.block_size=64",
        f"data.batch_size={BATCH}",
        f"data.max_bytes={MAX_BYTES}",
        f"data.cache_dir={cache}",
        "trainer.accelerator=cpu",
        "trainer.max_steps=2",
        "trainer.val_check_interval=2",
        VAL_WINDOWS,
        "trainer.log_every_n_steps=1",
        "trainer.enable_progress_bar=false",
        "callbacks.telemetry.enabled=false",
        "callbacks.tasks.names=[]",  # no task read here
        "sample.max_new_tokens=0",
        "logger=csv",
        "optim.lr=1e-9",  # Adam moves each weight by ~lr per step: the model stays the exported one
        "optim.min_lr=1e-9",
        "optim.warmup_steps=0",
        *overrides,
    ]
    raw = compose_cfg(*args)
    return train_app(validate(raw), raw, run_dir)


@pytest.mark.slow
@pytest.mark.parametrize("shape", ["llama", "gpt2"])
def test_train_starts_from_the_exported_model(
    shape: str, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, capsys
) -> None:
    cache = tmp_path_factory.getbasetemp() / "interop-init-cache"
    source = perturbed_gpt(GPT2_SHAPE if shape == "gpt2" else {"tie_embeddings": False}, seed=11)
    hf = Path(export_hf(source, tmp_path / "hf"))
    run_dir = tmp_path / "run"
    result = train(run_dir, cache, f"model.init_from={hf}")
    assert result["status"] == "finished", result
    final = json.loads((run_dir / "metrics.json").read_text())["final_val_loss"]

    exported = val_loss(gpt_from_hf(hf), cache)
    torch.manual_seed(0)
    fresh = val_loss(GPT(source.cfg), cache)  # what a run that ignored init_from would start at
    assert abs(final - exported) < 1e-4
    assert abs(fresh - exported) > 0.05  # the check above can tell the two apart

    trained = load_gpt(run_dir / "checkpoints" / "last.ckpt")
    assert trained.cfg.init_from == str(hf) and trained.cfg.vocab_size == source.cfg.vocab_size
    for name, tensor in source.state_dict().items():
        torch.testing.assert_close(trained.state_dict()[name], tensor, rtol=0, atol=1e-6)

    # evaluate.py on the run's checkpoint, same split and batches, reports the run's val/loss
    data = [f"data.cache_dir={cache}", f"data.max_bytes={MAX_BYTES}"]
    batches = [f"batch_size={BATCH}", VAL_WINDOWS]
    ckpt = run_dir / "checkpoints" / "last.ckpt"
    capsys.readouterr()
    assert EVALUATE.main([f"ckpt_path={ckpt}", *data, *batches]) == 0
    out = capsys.readouterr().out
    loss = float(out.split("\nloss")[1].split()[0])
    assert loss == pytest.approx(final, abs=1e-5)
    bpb = float(out.split("\nbpb")[1].split()[0])
    # bytes: every token is one byte of text except the end-of-text id after each file (0xFF, which
    # UTF-8 never holds), so bits per byte = loss / ln 2 × tokens / (tokens - end-of-text ids)
    val = np.asarray(prepare_tokens(DataConfig(max_bytes=MAX_BYTES, cache_dir=str(cache))).tokens("val"))
    assert bpb == pytest.approx(loss / math.log(2) * val.size / (val != 0xFF).sum(), abs=1e-5)


def write_hf(tmp_path: Path, overrides: dict[str, Any], tokenizer: Any = None) -> Path:
    """An exported tiny model, with `tokenizer` shipped beside it when given."""
    tok_dir = None
    if tokenizer is not None:
        tok_dir = tmp_path / "tok"
        tokenizer.save(tok_dir)
    return Path(export_hf(perturbed_gpt(overrides), tmp_path / "hf", tok_dir))


def test_a_vocabulary_smaller_than_the_tokenizer_is_refused(tmp_path: Path) -> None:
    hf = write_hf(tmp_path, {"vocab_size": 200})
    cfg = TrainConfig(model=GPTConfig(init_from=str(hf)))
    with pytest.raises(ValueError, match=r"vocab_size=200, fewer than the 256 ids"):
        model_config(cfg, 256, ByteTokenizer())


def test_the_checkpoint_architecture_is_kept_and_never_resized(tmp_path: Path) -> None:
    hf = write_hf(tmp_path, {"vocab_size": 300, "ffn_hidden": 96})
    cfg = TrainConfig(model=GPTConfig(init_from=str(hf), n_layer=6, block_size=32, dropout=0.1))
    got = model_config(cfg, 256, ByteTokenizer())
    want = GPTConfig(**TINY | {"vocab_size": 300, "ffn_hidden": 96})
    assert (got.vocab_size, got.n_layer, got.hidden_dim) == (300, want.n_layer, 96)
    assert (got.block_size, got.dropout, got.init_from) == (32, 0.1, str(hf))


def test_qk_norm_cannot_start_from_a_checkpoint_without_it(tmp_path: Path) -> None:
    hf = write_hf(tmp_path, {})
    cfg = TrainConfig(model=GPTConfig(init_from=str(hf), qk_norm=True))
    with pytest.raises(ValueError, match=r"model.qk_norm=True cannot start from model.init_from"):
        model_config(cfg, 256, ByteTokenizer())


def test_more_context_than_learned_positions_is_refused(tmp_path: Path) -> None:
    hf = write_hf(tmp_path, GPT2_SHAPE)
    cfg = TrainConfig(model=GPTConfig(init_from=str(hf), block_size=128))
    with pytest.raises(ValueError, match=r"model.block_size=128 exceeds the 64 learned positions"):
        model_config(cfg, 256, ByteTokenizer())


def test_a_different_shipped_tokenizer_is_warned_about(tmp_path: Path, caplog) -> None:
    texts = ["def f(x):\n    return x * 2\n", "for i in range(10):\n    print(i)\n"] * 30
    bpe = BPETokenizer.train(texts, 280)
    hf = write_hf(tmp_path, {"vocab_size": 300}, bpe)
    cfg = TrainConfig(model=GPTConfig(init_from=str(hf)))
    with caplog.at_level(logging.WARNING, logger="gptlab"):
        model_config(cfg, 280, BPETokenizer.from_file(tmp_path / "tok" / "tokenizer.json"))
    assert not [r for r in caplog.records if "differs" in r.getMessage()]
    with caplog.at_level(logging.WARNING, logger="gptlab"):
        model_config(cfg, 256, ByteTokenizer())
    assert [r for r in caplog.records if "differs from the data's tokenizer" in r.getMessage()]


def test_a_mup_model_at_its_base_width_starts_from_the_checkpoint_as_transformers_runs_it(
    tmp_path: Path,
) -> None:
    """μP at its base width is SP, so init_from is defined there: the started model's logits are the
    checkpoint's as transformers computes them (the oracle), and μP is kept for training."""
    from transformers import AutoModelForCausalLM

    from gptlab.export.init_from import init_from_hf

    hf = write_hf(tmp_path, {})
    cfg = TrainConfig(
        model=GPTConfig(init_from=str(hf), parametrization="mup", mup_base_width=TINY["n_embd"])
    )
    got = model_config(cfg, 256, ByteTokenizer())
    assert (got.parametrization, got.mup_base_width) == ("mup", TINY["n_embd"])
    model = GPT(got)
    init_from_hf(model, hf)
    idx = torch.randint(0, 256, (2, 32), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        want = AutoModelForCausalLM.from_pretrained(hf).eval()(idx).logits
        torch.testing.assert_close(model.eval()(idx), want, rtol=1e-4, atol=1e-4)


def test_a_mup_model_off_the_checkpoints_width_is_refused_naming_it(tmp_path: Path) -> None:
    """The preset's n_embd (128 here) is replaced by the checkpoint's (64): the check is against it."""
    hf = write_hf(tmp_path, {})
    cfg = TrainConfig(model=GPTConfig(init_from=str(hf), parametrization="mup", mup_base_width=32))
    with pytest.raises(ValueError) as err:
        model_config(cfg, 256, ByteTokenizer())
    assert " ".join(str(err.value).split()) == (
        f"model.init_from='{hf}' holds a model of n_embd=64 (head width 16), which is μP's function only at "
        "its base width; got model.mup_base_width=32, mup_base_head_dim=None; accepted: mup_base_width=64 "
        "(mup_base_head_dim null), or parametrization=sp"
    )
