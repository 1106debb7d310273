"""The planner sizes the embedding and the logits at the vocabulary train.py will build: the model's
vocab_size grown to the data tokenizer's. Oracles: the configured sizes written here, a tokenizer.json
of a hand-counted vocabulary, and the fp32 logits' bytes (B·T·V·4) in the measured activations."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gptlab.compose import compose_config
from gptlab.hardware import lookup
from gptlab.planning.cli import main
from gptlab.planning.options import setup_from
from gptlab.planning.plan import plan
from tests.planning.test_plan_cli import TINY


def planned(*overrides: str) -> int:
    return setup_from(compose_config([*TINY, *overrides])).model.vocab_size


def word_level_tokenizer(path: Path, words: int) -> Path:
    """A tokenizer.json of `words` words plus one added <|endoftext|>: words + 1 ids."""
    vocab = {f"w{i}": i for i in range(words)}
    spec = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {"id": words, "content": "<|endoftext|>", "single_word": False, "lstrip": False,
             "rstrip": False, "normalized": False, "special": True}
        ],
        "normalizer": None,
        "pre_tokenizer": {"type": "Whitespace"},
        "post_processor": None,
        "decoder": None,
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "w0"},
    }  # fmt: skip
    path.write_text(json.dumps(spec))
    return path


def test_the_vocabulary_grows_to_the_tokenizers_as_train_py_grows_it(tmp_path: Path) -> None:
    assert planned() == 256  # byte-level: the preset's 256 and the bytes agree
    assert planned("data.tokenizer=bpe", "data.bpe_vocab_size=32768") == 32768
    tok = word_level_tokenizer(tmp_path / "tokenizer.json", 700)
    assert planned("data.tokenizer=pretrained", f"data.tokenizer_path={tok}") == 701
    assert planned("data=tokens", "data.path=shards/*.bin", "data.vocab_size=50257") == 50257
    assert planned("data=tokens", "data.path=shards/*.bin", f"data.tokenizer_path={tok}") == 701
    # never shrunk: a model preset larger than the tokenizer keeps its own (train.py pads nothing away)
    assert planned("model.vocab_size=50304", "data.tokenizer=bpe", "data.bpe_vocab_size=4096") == 50304


def test_the_logits_of_a_larger_vocabulary_are_in_the_measured_peak() -> None:
    """fp32 logits (and their gradient) are B·T·V·4 bytes each: the activations at 32,768 ids exceed
    those at 256 by at least one such tensor's difference."""
    gpu = lookup("H200")
    small = plan(setup_from(compose_config([*TINY, "data.batch_size=4"])), gpu)
    big = plan(
        setup_from(
            compose_config([*TINY, "data.batch_size=4", "data.tokenizer=bpe", "data.bpe_vocab_size=32768"])
        ),
        gpu,
    )
    logits_difference = 4 * 32 * (32768 - 256) * 4
    assert big.memory.peak - small.memory.peak >= logits_difference
    assert big.params["tok_emb"] == 32768 * 48 and small.params["tok_emb"] == 256 * 48


def test_the_printed_plan_names_where_the_vocabulary_came_from(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*TINY, "data.tokenizer=bpe", "data.bpe_vocab_size=8192", "plan.gpu=H200"]) == 0
    model_line = capsys.readouterr().out.splitlines()[1]
    assert (
        "vocab 8,192 (data.tokenizer=bpe data.bpe_vocab_size=8192; model.vocab_size=256 grown" in model_line
    )


@pytest.mark.parametrize(
    "overrides, says",
    [
        (["data.tokenizer=pretrained", "data.tokenizer_path={tmp}/nowhere/tokenizer.json"], "nowhere"),
        (["data.tokenizer=pretrained"], "needs data.tokenizer_path"),
        (["data.tokenizer=bpe", "data.bpe_vocab_size=100"], "data.bpe_vocab_size=100 must be in 257.."),
        (["data.tokenizer=sentencepiece"], "byte, bpe, pretrained, tiktoken"),
    ],
)
def test_a_tokenizer_train_py_would_refuse_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], overrides: list[str], says: str
) -> None:
    """Refused as train.py refuses it, not planned at the preset's vocabulary."""
    argv = [o.format(tmp=tmp_path) for o in overrides]
    with pytest.raises(SystemExit) as info:
        main([*TINY, *argv, "plan.gpu=H200"])
    assert info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("error: ") and says in err, err


def test_the_documented_bpe_plan_runs_as_written(capsys: pytest.CaptureFixture[str]) -> None:
    """docs/performance.md, Planning: `python scripts/plan.py model=llama_125m data.tokenizer=bpe
    data.bpe_vocab_size=32768 model.block_size=2048 plan.gpu=H200` plans 32,768 ids, not 256: the
    tied embedding is 32,768 × 768 (one fake step of the 125M shape, seconds)."""
    argv = ["model=llama_125m", "data.tokenizer=bpe", "data.bpe_vocab_size=32768", "model.block_size=2048"]
    assert main([*argv, "plan.gpu=H200"]) == 0
    out = capsys.readouterr().out
    assert "T=2048, vocab 32,768 (data.tokenizer=bpe" in out, out
    (emb,) = [line for line in out.splitlines() if line.strip().startswith("tok_emb")]
    assert emb.split()[1] == f"{32768 * 768 / 1e6:.2f}M", emb
