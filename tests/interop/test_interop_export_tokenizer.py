"""scripts/export.py ships the tokenizer recorded in the checkpoint, so HF tools and gptlab read it back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import AutoTokenizer

from gptlab.checkpoints import load_checkpoint, load_model
from gptlab.data.spec import tokenizer_spec
from gptlab.data.tokenizer_files import BOS_CANDIDATES, EOS_CANDIDATES
from gptlab.data.tokenizers import BPETokenizer, ByteTokenizer, PretrainedTokenizer
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


# Text an export must read as gptlab does: every special token's text as ordinary characters
# (gptlab's tokenizers encode text that way: a document quoting <|endoftext|> is not cut there).
HOSTILE = [
    "<|endoftext|", "|endoftext|>", "<<|endoftext|>>", "<|endoftext|><|endoftext|>", "<|ENDOFTEXT|>",
    "Grüße ÿ \ufffd 日本語 🙂 e\u0301 \u202eabc \x00 \t\r\n  ", "",
]  # fmt: skip


def special_strings(hf_tok, gptlab_tok) -> list[str]:
    """Every special string either side knows: transformers' special and added tokens, the one
    lm-eval adds as padding, the EOS/BOS candidates gptlab looks for, and gptlab's own EOS."""
    eos = gptlab_tok.decode([gptlab_tok.eos_id]) if gptlab_tok.eos_id is not None else None
    known = [*hf_tok.all_special_tokens, *(t.content for t in hf_tok.added_tokens_decoder.values())]
    return sorted({*known, "<|pad|>", *EOS_CANDIDATES, *BOS_CANDIDATES, *([eos] if eos else [])})


def texts_holding(specials: list[str]) -> list[str]:
    """Each special string alone, inside text, at both ends, all of them at once, and hostile text."""
    around = ["{}", "x{}y", " {} ", "{}def f():\n    return 1{}", "Köln{}🙂"]
    return [t.format(s, s) for s in specials for t in around] + ["".join(specials), *HOSTILE]


def pretrained_with_specials(directory: Path) -> Path:
    """A user's tokenizer.json with several special tokens (BOS, EOS, padding)."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    specials = ["<s>", "</s>", "<|endoftext|>", "<pad>"]
    trainer = trainers.BpeTrainer(
        vocab_size=300, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(CORPUS, trainer=trainer)
    directory.mkdir()
    tok.save(str(directory / "tokenizer.json"))
    return directory


@pytest.mark.parametrize("kind", ["byte", "bpe", "pretrained"])
def test_export_reads_special_token_text_as_gptlab_does(kind: str, tmp_path: Path) -> None:
    """AutoTokenizer on the export gives gptlab's ids on every string, special strings included,
    also after lm-eval's HF model adds its padding token (<|pad|>, when the tokenizer has no EOS)."""
    args = []
    if kind == "bpe":
        ours = BPETokenizer.train(CORPUS, 300)
        spec = tokenizer_spec(ours)
    else:
        spec = {"name": "byte"}
        ours = ByteTokenizer()
    if kind == "pretrained":
        ours = PretrainedTokenizer(pretrained_with_specials(tmp_path / "tok"))
        args = [f"tokenizer_dir={tmp_path / 'tok'}"]
    ckpt = consolidated(tmp_path / "c.pt", {"vocab_size": 300}, spec)
    assert EXPORT.main([f"ckpt_path={ckpt}", f"out_dir={tmp_path / 'hf'}", *args]) == 0
    hf_tok = AutoTokenizer.from_pretrained(tmp_path / "hf")
    specials = special_strings(hf_tok, ours)
    if kind != "byte":
        assert hf_tok.eos_token == "<|endoftext|>" and "<|endoftext|>" in specials
    if kind == "pretrained":
        assert {"<s>", "</s>", "<pad>"} <= set(specials) and hf_tok.bos_token == "<s>"
    texts = texts_holding(specials)
    want = [[int(i) for i in ours.encode(t)] for t in texts]
    assert [hf_tok(t, add_special_tokens=False)["input_ids"] for t in texts] == want
    assert [hf_tok.encode(t) for t in texts] == want  # the export adds no BOS of its own
    assert hf_tok(texts, add_special_tokens=False)["input_ids"] == want  # the batched path
    hf_tok.add_special_tokens({"pad_token": "<|pad|>"})  # as lm-eval's configure_pad_token may
    assert [hf_tok.encode(t, add_special_tokens=False) for t in texts] == want
