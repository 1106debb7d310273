"""The lm-eval bridge (`--model gptlab`) against lm-eval's own HF model on the exported checkpoint.

The oracle shares no code with gptlab: lm-eval's HFLM reads the exported directory through
transformers (fp32, CPU) and scores the same local task YAML through the same lm-eval evaluator.
They must give the same acc, acc_norm, acc_bytes and exact_match (is_greedy), and per-request
log-likelihoods within 1e-4 nats (two fp32 implementations of one architecture; measured ~1e-6).
The task's rows put a BPE merge across the context/choice boundary, a context ending in whitespace,
non-ASCII choices (characters != bytes) and a choice that is the model's own greedy continuation.
loglikelihood_rolling is checked against transformers' logits through log_softmax over windows
written here, generate_until against transformers' greedy `generate`, both also against HFLM.

lm-eval runs once per module: `--model gptlab` through scripts/run_lm_eval.py (the documented
command, in-process), HFLM through lm_eval.simple_evaluate.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import lm_eval
import pytest
import torch
from lm_eval.api.instance import Instance
from lm_eval.models.huggingface import HFLM
from lm_eval.tasks import TaskManager
from transformers import AutoModelForCausalLM, AutoTokenizer

from gptlab.checkpoints import load_model
from gptlab.data.spec import tokenizer_spec
from gptlab.data.tokenizers import BPETokenizer
from gptlab.evaluation.lm_eval_model import GptlabLM
from gptlab.evaluation.run import load_task
from gptlab.evaluation.scoring import choice_loglikelihoods
from tests.interop.helpers import load_cli, perturbed_gpt
from tests.tasks.test_transformers_oracle import CORPUS

EXPORT = load_cli("scripts/export.py")
LM_EVAL = load_cli("scripts/run_lm_eval.py")
EVALUATE = load_cli("evaluate.py")
TOL = 1e-4
BLOCK = 64
ROWS: list[dict[str, Any]] = [
    {"context": "def add(a, b):\n   ", "choices": [" return a + b", " pass", " yield b"], "answer": 0},
    {"context": "class Stac", "choices": ["k:", "ks.", "ked"], "answer": 0},  # "ck" merges across
    {"context": "Grüße aus", "choices": [" Köln", " Stack", " ça va"], "answer": 1},
    {"context": "The quick brown", "choices": [" fox jumps", " dog sits", "ness"], "answer": 2},
    # per character (acc_norm) the ASCII choice wins, per byte (acc_bytes, our acc_norm) the other
    {"context": "Grüße aus Köln,", "choices": [" ça ç ça ç", " ab cd ef"], "answer": 0},
]
METRICS = ("acc", "acc_norm", "acc_bytes", "exact_match")


def task_yaml(name: str, data: Path) -> str:
    """A local multiple-choice task: plain rows, choices scored as written."""
    return "\n".join(
        [
            f"task: {name}",
            "dataset_path: json",
            "dataset_kwargs:",
            "  data_files:",
            f"    test: {data}",
            "test_split: test",
            "output_type: multiple_choice",
            'doc_to_text: "{{context}}"',
            "doc_to_choice: choices",
            "doc_to_target: answer",
            'target_delimiter: ""',
            "metric_list:",
            *[f"  - metric: {m}" for m in METRICS],
            "",
        ]
    )


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A tiny Llama-shaped GPT with a 300-token BPE: its consolidated file, its HF export, and
    transformers' reading of the export."""
    root = tmp_path_factory.mktemp("lm_eval_oracle")
    model = perturbed_gpt({"vocab_size": 300, "block_size": BLOCK}, scale=0.2)
    ckpt = root / "c.pt"
    spec = tokenizer_spec(BPETokenizer.train(CORPUS, 300))
    torch.save(
        {"model_config": model.cfg.to_dict(), "state_dict": model.state_dict(), "tokenizer": spec}, ckpt
    )
    assert EXPORT.main([f"ckpt_path={ckpt}", f"out_dir={root / 'hf'}"]) == 0
    hf = AutoModelForCausalLM.from_pretrained(root / "hf", torch_dtype=torch.float32).eval()
    return {
        "root": root,
        "ckpt": ckpt,
        "hf_dir": root / "hf",
        "hf": hf,
        "tok": AutoTokenizer.from_pretrained(root / "hf"),
    }


def greedy_rows(hf: Any, tok: Any) -> list[dict[str, Any]]:
    """Rows whose right choice is transformers' greedy continuation (2 tokens) of the context, for
    contexts where that text encodes back to the same tokens (so is_greedy can be True)."""
    rows = []
    for context in [CORPUS[3][:k] for k in range(4, len(CORPUS[3]), 4)]:
        ids = tok(context, add_special_tokens=False)["input_ids"]
        new = hf.generate(
            torch.tensor([ids]), max_new_tokens=2, do_sample=False, pad_token_id=tok.eos_token_id
        )
        text = tok.decode(new[0, len(ids) :])
        if (
            "\ufffd" not in text
            and tok(context + text, add_special_tokens=False)["input_ids"]
            == ids + new[0, len(ids) :].tolist()
        ):
            rows.append({"context": context, "choices": ["zzz", text], "answer": 1})
    assert len(rows) >= 2
    return rows[:3]


@pytest.fixture(scope="module")
def runs(exported: dict[str, Any]) -> dict[str, Any]:
    """The task written out, then lm-eval run on it with both models (samples logged)."""
    root = exported["root"]
    rows = ROWS + greedy_rows(exported["hf"], exported["tok"])
    (root / "mc.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    (root / "mc.yaml").write_text(task_yaml("tiny_mc", root / "mc.jsonl"))
    hflm = HFLM(pretrained=str(exported["hf_dir"]), dtype="float32", device="cpu", batch_size=4)
    hf = lm_eval.simple_evaluate(
        model=hflm, tasks=[str(root / "mc.yaml")], task_manager=TaskManager(include_defaults=False),
        bootstrap_iters=0, log_samples=True,
    )  # fmt: skip
    out = root / "out"
    argv = [
        "--model", "gptlab", "--model_args", f"ckpt_path={exported['ckpt']}",
        "--tasks", str(root / "mc.yaml"), "--device", "cpu", "--batch_size", "5",
        "--output_path", str(out), "--log_samples",
    ]  # fmt: skip
    assert LM_EVAL.main(argv) == 0
    (results,) = out.rglob("results_*.json")
    (samples,) = out.rglob("samples_tiny_mc_*.jsonl")
    gptlab = {
        "results": json.loads(results.read_text())["results"],
        "samples": [json.loads(line) for line in samples.read_text().splitlines()],
    }
    return {"hf": hf, "gptlab": gptlab, "hflm": hflm, "rows": rows, "yaml": root / "mc.yaml"}


def by_doc(samples: list[dict[str, Any]]) -> dict[int, list[tuple[float, bool]]]:
    """doc_id -> (log-likelihood, is_greedy) per choice, as lm-eval logged them."""
    return {
        s["doc_id"]: [(float(ll), str(g) == "True") for ll, g in (r[0] for r in s["resps"])] for s in samples
    }


def test_gptlab_and_lm_evals_hf_model_agree_on_a_local_task(runs: dict[str, Any]) -> None:
    hf, ours = runs["hf"]["results"]["tiny_mc"], runs["gptlab"]["results"]["tiny_mc"]
    for metric in METRICS:
        assert ours[f"{metric},none"] == hf[f"{metric},none"], metric
    want, got = by_doc(runs["hf"]["samples"]["tiny_mc"]), by_doc(runs["gptlab"]["samples"])
    assert sorted(got) == sorted(want) == list(range(len(runs["rows"])))
    for doc in want:
        assert [ll for ll, _ in got[doc]] == pytest.approx([ll for ll, _ in want[doc]], abs=TOL), doc
        assert [g for _, g in got[doc]] == [g for _, g in want[doc]], doc
    greedy = [g for doc in want.values() for _, g in doc]
    assert any(greedy) and not all(greedy)  # is_greedy is exercised both ways


def test_evaluate_py_reads_the_yaml_as_lm_eval_and_its_acc_norm_is_lm_evals_acc_bytes(
    runs: dict[str, Any], exported: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    """evaluate.py task=<yaml>: acc is lm-eval's acc, and acc_norm (per byte) its acc_bytes."""
    capsys.readouterr()
    assert EVALUATE.main([f"ckpt_path={exported['ckpt']}", f"task={runs['yaml']}"]) == 0
    out = capsys.readouterr().out.splitlines()
    row = next(line.split() for line in out if line.startswith(str(runs["yaml"])))
    hf = runs["hf"]["results"]["tiny_mc"]
    assert hf["acc_norm,none"] != hf["acc_bytes,none"]  # the task tells characters from bytes
    assert float(row[1]) == pytest.approx(hf["acc,none"], abs=5e-5)
    assert float(row[2]) == pytest.approx(hf["acc_bytes,none"], abs=5e-5)


def rolling_oracle(hf: Any, ids: list[int], prefix: int, block: int) -> float:
    """log p(document) with transformers: the tokens in chunks of `block`, each chunk ending at e
    scored from the `block` tokens before it ([prefix] + document, cut to u[e - block : e])."""
    u = [prefix, *ids]
    total = 0.0
    for s in range(0, len(ids), block):
        e = min(s + block, len(ids))
        window = u[max(0, e - block) : e]
        with torch.no_grad():
            logp = torch.log_softmax(hf(torch.tensor([window])).logits[0].double(), dim=-1)
        total += sum(float(logp[len(window) - (e - p), ids[p]]) for p in range(s, e))
    return total


def test_loglikelihood_rolling_equals_log_softmax_over_windows(
    runs: dict[str, Any], exported: dict[str, Any]
) -> None:
    tok, hf = exported["tok"], exported["hf"]
    long_doc = "".join(CORPUS[:6])  # over two windows of 64 tokens
    docs = [long_doc, "The quick brown fox.", long_doc[: len(long_doc) // 2]]
    assert len(tok(long_doc, add_special_tokens=False)["input_ids"]) > 2 * BLOCK
    ours = GptlabLM(ckpt_path=str(exported["ckpt"]), batch_size=2, device="cpu")
    requests = [Instance("loglikelihood_rolling", {}, (d,), 0) for d in docs]
    got = ours.loglikelihood_rolling(requests)
    want = [
        rolling_oracle(hf, tok(d, add_special_tokens=False)["input_ids"], tok.eos_token_id, BLOCK)
        for d in docs
    ]
    assert got == pytest.approx(want, abs=TOL)
    assert got == pytest.approx(runs["hflm"].loglikelihood_rolling(requests), abs=TOL)


def test_generate_until_equals_transformers_greedy_and_stops_at_until(
    runs: dict[str, Any], exported: dict[str, Any]
) -> None:
    tok, hf = exported["tok"], exported["hf"]
    ours = GptlabLM(ckpt_path=str(exported["ckpt"]), device="cpu")
    contexts = ["The man sits on the", "class Stack:\n    def"]
    free = [Instance("generate_until", {}, (c, {"until": [], "max_gen_toks": 8}), 0) for c in contexts]
    got = ours.generate_until(free)
    for context, text in zip(contexts, got, strict=True):
        ids = tok(context, return_tensors="pt", add_special_tokens=False)["input_ids"]
        out = hf.generate(ids, max_new_tokens=8, do_sample=False, pad_token_id=tok.eos_token_id)
        assert out.shape[1] == ids.shape[1] + 8 and tok.eos_token_id not in out[0].tolist()  # 8 tokens
        assert text == tok.decode(out[0, ids.shape[1] :])
    # `until`: the text ends before the first occurrence of the stop string
    stops = [text[3:5] for text in got]
    cut = [
        Instance("generate_until", {}, (c, {"until": [s], "max_gen_toks": 8}), 0)
        for c, s in zip(contexts, stops, strict=True)
    ]
    stopped = ours.generate_until(cut)
    assert stopped == [text[: text.index(s)] for text, s in zip(got, stops, strict=True)]
    assert stopped == runs["hflm"].generate_until(cut)
    assert got == runs["hflm"].generate_until(free)


def test_lm_evals_hf_model_scores_special_token_text_as_the_checkpoint(
    runs: dict[str, Any], exported: dict[str, Any]
) -> None:
    """Text holding "<|endoftext|>" (as a choice, in the context, both) is scored alike by lm-eval's HF
    model on the export and by the checkpoint: both read it as characters, not as the EOS token."""
    hflm = runs["hflm"]  # lm-eval's HF model on the export, as the module's run made it
    ours = GptlabLM(ckpt_path=str(exported["ckpt"]), batch_size=4, device="cpu")
    pairs = [("x", "<|endoftext|>"), ("The quick brown", " fox<|endoftext|>"), ("a<|endoftext|>b", " c")]
    requests = [Instance("loglikelihood", {}, pair, 0) for pair in pairs]
    want, got = hflm.loglikelihood(requests), ours.loglikelihood(requests)
    assert [ll for ll, _ in got] == pytest.approx([ll for ll, _ in want], abs=TOL)
    assert [g for _, g in got] == [g for _, g in want]
    eot = len(exported["tok"]("<|endoftext|>", add_special_tokens=False)["input_ids"])
    assert eot > 1  # the choice is scored as its characters' tokens


EMPTY_ROWS = [
    {"context": "", "choices": ["The quick", "class Stack:", "zzz"], "answer": 0},
    {"context": "", "choices": [" fox", "def add(a, b):"], "answer": 1},
]


def test_an_empty_context_is_scored_after_end_of_text_as_lm_eval_scores_it(
    runs: dict[str, Any], exported: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    """A YAML document with an empty context: evaluate.py scores it (it refused it before) with the
    log-likelihoods lm-eval's HF model gives the export, and its bpb is theirs."""
    root = exported["root"]
    (root / "empty.jsonl").write_text("".join(json.dumps(r) + "\n" for r in EMPTY_ROWS))
    (root / "empty.yaml").write_text(task_yaml("tiny_empty", root / "empty.jsonl"))
    items = load_task(str(root / "empty.yaml"))
    assert [item.context for item in items] == ["", ""]
    requests = [Instance("loglikelihood", {}, ("", c), 0) for r in EMPTY_ROWS for c in r["choices"]]
    want = [ll for ll, _ in runs["hflm"].loglikelihood(requests)]
    model, tokenizer = load_model(str(exported["ckpt"]), "cpu")
    got = choice_loglikelihoods(model, tokenizer, items, 2, torch.device("cpu")).loglikelihoods
    assert [ll for lls in got for ll in lls] == pytest.approx(want, abs=TOL)
    capsys.readouterr()
    assert EVALUATE.main([f"ckpt_path={exported['ckpt']}", f"task={root / 'empty.yaml'}"]) == 0
    row = next(line.split() for line in capsys.readouterr().out.splitlines() if "empty.yaml" in line)
    right = [want[0], want[3 + 1]]  # each document's right choice, in request order
    n_bytes = sum(len(r["choices"][r["answer"]].encode()) for r in EMPTY_ROWS)
    assert float(row[5]) == pytest.approx(-sum(right) / math.log(2) / n_bytes, abs=6e-5)


def test_the_bridge_names_the_task_document_and_choice_it_cannot_score(exported: dict[str, Any]) -> None:
    """A choice the BPE merges into its context (as evaluate.py says it: `line 1 choice 0`)."""
    tok = exported["tok"]
    ours = GptlabLM(ckpt_path=str(exported["ckpt"]), device="cpu")
    context, choice = merging_pair(tok)
    ok = Instance("loglikelihood", {}, (context, " x"), 0, ("tiny_mc", 3, 1))
    bad = Instance("loglikelihood", {}, (context, choice), 1, ("tiny_mc", 3, 1))
    want = f"task 'tiny_mc' doc 3 choice 1: the continuation {choice!r} adds no tokens after its context"
    with pytest.raises(ValueError, match=f"^{re.escape(want)}"):
        ours.loglikelihood([ok, bad])


def merging_pair(tok: Any) -> tuple[str, str]:
    """A (context, one-character choice) of the corpus that the export's BPE merges into one token."""
    for text in CORPUS:
        for k in range(2, len(text)):
            context, choice = text[: k - 1], text[k - 1]
            if context.strip() != context or not choice.strip():
                continue
            head = tok(context, add_special_tokens=False)["input_ids"]
            if len(tok(context + choice, add_special_tokens=False)["input_ids"]) == len(head):
                return context, choice
    raise AssertionError("the BPE merges nothing")
