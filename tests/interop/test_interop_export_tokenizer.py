"""scripts/export.py ships the tokenizer recorded in the checkpoint, so HF tools and gptlab read it back."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from transformers import AutoTokenizer

from gptlab.checkpoints import load_checkpoint, load_model
from gptlab.data.spec import tokenizer_spec
from gptlab.data.tokenizers import BPETokenizer, ByteTokenizer
from gptlab.model import GPTConfig
from tests.interop.helpers import GPT2_SHAPE, load_cli, perturbed_gpt

EXPORT = load_cli("scripts/export.py")
TEXT = "def greet(name):\n    return f'Grüße, {name}!'  # ünïcode\n"
CORPUS = [
    "def add(a, b):\n    return a + b\n",
    "class Stack:\n    def push(self, item):\n        self.items.append(item)\n",
    "Grüße aus Köln, ça va? The quick brown fox jumps over the lazy dog.\n",
] * 20


def consolidated(path: Path, overrides: dict, tokenizer: dict) -> Path:
    """A consolidated checkpoint file of a perturbed tiny GPT with the given tokenizer spec."""
    model = perturbed_gpt(overrides)
    cfg: GPTConfig = model.cfg
    torch.save(
        {"model_config": cfg.to_dict(), "state_dict": model.state_dict(), "tokenizer": tokenizer}, path
    )
    return path


def test_bpe_tokenizer_of_the_run_is_shipped(tmp_path: Path) -> None:
    bpe = BPETokenizer.train(CORPUS, 300)
    ckpt = consolidated(tmp_path / "c.pt", GPT2_SHAPE | {"vocab_size": 300}, tokenizer_spec(bpe))
    assert EXPORT.main([f"ckpt_path={ckpt}", f"out_dir={tmp_path / 'hf'}"]) == 0
    out = tmp_path / "hf"
    expected = bpe.encode(TEXT)
    assert len(expected) < len(TEXT.encode())  # merges happen: this is not the byte tokenizer
    hf_tok = AutoTokenizer.from_pretrained(out)
    assert hf_tok(TEXT)["input_ids"] == expected
    config = json.loads((out / "config.json").read_text())
    assert config["eos_token_id"] == bpe.eos_id == hf_tok.eos_token_id
    assert json.loads((out / "tokenizer_config.json").read_text())["gptlab_name"] == bpe.name
    model, tok = load_model(out)
    assert list(tok.encode(TEXT)) == expected and tok.decode(expected) == TEXT
    assert model.cfg.vocab_size == 300


def test_byte_tokenizer_is_shipped_as_bytes(tmp_path: Path) -> None:
    ckpt = consolidated(tmp_path / "c.pt", {}, {"name": "byte"})
    assert EXPORT.main([f"ckpt_path={ckpt}", f"out_dir={tmp_path / 'hf'}"]) == 0
    hf_tok = AutoTokenizer.from_pretrained(tmp_path / "hf")
    assert hf_tok(TEXT)["input_ids"] == list(TEXT.encode())
    assert hf_tok.decode(list(TEXT.encode())) == TEXT
    assert isinstance(load_model(tmp_path / "hf")[1], ByteTokenizer)


def test_tokenizer_dir_overrides_the_recorded_one(tmp_path: Path) -> None:
    bpe = BPETokenizer.train(CORPUS, 280)
    bpe.save(tmp_path / "tok")
    ckpt = consolidated(tmp_path / "c.pt", {"vocab_size": 300}, {"name": "byte"})
    args = [f"ckpt_path={ckpt}", f"out_dir={tmp_path / 'hf'}", f"tokenizer_dir={tmp_path / 'tok'}"]
    assert EXPORT.main(args) == 0
    assert AutoTokenizer.from_pretrained(tmp_path / "hf")(TEXT)["input_ids"] == bpe.encode(TEXT)
    _, spec = load_checkpoint(tmp_path / "hf")
    assert spec["name"] == bpe.name and "json" in spec


def test_checkpoint_without_tokenizer_record_exports_as_bytes(tmp_path: Path) -> None:
    model = perturbed_gpt({})
    torch.save({"model_config": model.cfg.to_dict(), "state_dict": model.state_dict()}, tmp_path / "c.pt")
    assert EXPORT.main([f"ckpt_path={tmp_path / 'c.pt'}", f"out_dir={tmp_path / 'hf'}"]) == 0
    assert isinstance(load_model(tmp_path / "hf")[1], ByteTokenizer)
