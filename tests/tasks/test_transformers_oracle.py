"""Per-item log-likelihoods equal transformers' on the exported checkpoint (fp32).

The oracle shares no code with gptlab.evaluation: the exported directory is read by
AutoTokenizer and AutoModelForCausalLM, each request is encoded as lm-eval-harness's HF model
encodes it (context and context+continuation separately, the continuation's tokens the tail), and
the log-probs are transformers' logits through log_softmax. A BPE tokenizer makes the split
non-trivial: merges cross the context/continuation boundary. Tolerance: 1e-4 nats per choice
(fp32 forwards through two implementations of the same architecture; measured differences ~1e-6).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from gptlab.checkpoints import load_model
from gptlab.data.spec import tokenizer_spec
from gptlab.data.tokenizers import BPETokenizer
from gptlab.evaluation import read_task
from gptlab.evaluation.scoring import choice_loglikelihoods
from tests.interop.helpers import GPT2_SHAPE, load_cli, perturbed_gpt

EXPORT = load_cli("scripts/export.py")
EVALUATE = load_cli("evaluate.py")
TOL = 1e-4
CORPUS = [
    "def add(a, b):\n    return a + b\n",
    "class Stack:\n    def push(self, item):\n        self.items.append(item)\n",
    "The man sits on the roof. He starts pulling up the shingles.\n",
    "Grüße aus Köln, ça va? The quick brown fox jumps over the lazy dog.\n",
] * 20
ROWS = [
    {"context": "def add(a, b):\n   ", "choices": [" return a + b", " pass", " yield b"], "answer": 0},
    {"context": "The quick brown", "choices": [" fox jumps", " dog sits", "ness"], "answer": 0},
    {
        "activity_label": "Roofing",
        "ctx_a": "The man sits on the roof.",
        "ctx_b": "he",
        "endings": ["starts pulling up the shingles.", "jumps over the lazy dog.", "says grüße."],
        "label": 0,
    },
    {"context": "class Stac", "choices": ["k:", "ks.", "ked"], "answer": 0},  # "ck" merges across
    {"context": "Grüße aus", "choices": [" Köln", " Stack", " the roof"], "answer": 0},
]


def hf_loglikelihood(model, tok, context: str, continuation: str) -> float:
    """lm-eval's HF model: trailing context whitespace joins the continuation; whole[len(context):]."""
    n = len(context) - len(context.rstrip())
    if n:
        context, continuation = context[:-n], context[-n:] + continuation
    ctx = tok(context, add_special_tokens=False)["input_ids"]
    whole = tok(context + continuation, add_special_tokens=False)["input_ids"]
    cont = whole[len(ctx) :]
    with torch.no_grad():  # the input is the context's own tokens, then the continuation's
        logits = model(torch.tensor([(ctx + cont)[:-1]])).logits[0].double()
    logp = torch.log_softmax(logits, dim=-1)[-len(cont) :]
    return float(logp.gather(-1, torch.tensor(cont)[:, None]).sum())


@pytest.fixture(scope="module")
def task(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("task") / "mixed.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    return path


@pytest.mark.parametrize("shape", [{}, GPT2_SHAPE], ids=["llama", "gpt2"])
def test_per_item_loglikelihoods_equal_transformers(shape: dict, task: Path, tmp_path: Path, capsys) -> None:
    bpe = BPETokenizer.train(CORPUS, 300)
    model = perturbed_gpt(shape | {"vocab_size": 300}, scale=0.2)
    ckpt = tmp_path / "c.pt"
    torch.save(
        {
            "model_config": model.cfg.to_dict(),
            "state_dict": model.state_dict(),
            "tokenizer": tokenizer_spec(bpe),
        },
        ckpt,
    )
    assert EXPORT.main([f"ckpt_path={ckpt}", f"out_dir={tmp_path / 'hf'}"]) == 0
    hf_model = AutoModelForCausalLM.from_pretrained(tmp_path / "hf", torch_dtype=torch.float32).eval()
    hf_tok = AutoTokenizer.from_pretrained(tmp_path / "hf")
    items = read_task(task)
    ours_model, ours_tok = load_model(ckpt)
    got = choice_loglikelihoods(ours_model, ours_tok, items, 5, torch.device("cpu"))
    oracle = []
    for item, row in zip(items, got.loglikelihoods, strict=True):
        want = [hf_loglikelihood(hf_model, hf_tok, item.context, item.delimiter + c) for c in item.choices]
        assert row == pytest.approx(want, abs=TOL)
        oracle.append(want)
    # the BPE does merge across the boundary somewhere: the continuation's tail tokens are not its
    # own encoding (so scoring continuation tokens encoded alone would be a different number)
    tails = [
        hf_tok(it.context + it.delimiter + c, add_special_tokens=False)["input_ids"][
            len(hf_tok(it.context, add_special_tokens=False)["input_ids"]) :
        ]
        != hf_tok(it.delimiter + c, add_special_tokens=False)["input_ids"]
        for it in items
        for c in it.choices
    ]
    assert any(tails)
    # and somewhere the context's own tokens are not the whole string's first tokens, so the input
    # (context tokens + continuation tokens, as lm-eval feeds it) differs from the whole's encoding
    heads = [
        hf_tok(it.context, add_special_tokens=False)["input_ids"]
        != hf_tok(it.context + it.delimiter + c, add_special_tokens=False)["input_ids"][
            : len(hf_tok(it.context, add_special_tokens=False)["input_ids"])
        ]
        for it in items
        for c in it.choices
    ]
    assert any(heads)
    # acc and bpb from the oracle's numbers equal what evaluate.py prints for the exported directory
    acc = sum(max(range(len(o)), key=o.__getitem__) == it.label for o, it in zip(oracle, items, strict=True))
    bits = -sum(o[it.label] for o, it in zip(oracle, items, strict=True)) / math.log(2)
    n_bytes = sum(len((it.delimiter + it.choices[it.label]).encode()) for it in items) + 4  # "\n   " moved
    capsys.readouterr()
    assert EVALUATE.main([f"ckpt_path={tmp_path / 'hf'}", f"task={task}"]) == 0
    row = next(line.split() for line in capsys.readouterr().out.splitlines() if line.startswith(str(task)))
    assert float(row[1]) == pytest.approx(acc / len(items), abs=5e-5)
    assert float(row[5]) == pytest.approx(bits / n_bytes, abs=5e-5)
