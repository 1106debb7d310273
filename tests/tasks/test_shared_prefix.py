"""The scorer's shared-context path (evaluation/shared_prefix.py) against each request scored alone.

Oracle: plain torch in this file, each request's tokens through `model(idx)` by themselves (the model's
own causal path, no packing) and log_softmax summed over the continuation. The packed path must give
every request the same log-likelihood and greedy flag, for the attention variants whose masks or
positions the packing rebuilds (RoPE, learned positions, NoPE layers, windows, soft-capped attention,
GQA, document masks with restarting and continuing positions), and must run each context once.

Tolerance 2e-5 nats, or 1e-6 of the sum where that is more (60-token continuations of -600 nats):
float32 rounding. The packed row goes through SDPA with an explicit mask, the alone request through
its causal kernel, which add in another order (each log-probability moves by ~1e-7 relative; the
measured gap is ~2e-6 on 16-token sums, 2.6e-5 = 4e-8 relative on 60-token ones); a position or mask
error moves a sum by 1e-2 or more here (the weights are perturbed to make the logits depend on the
context).
"""

from __future__ import annotations

import random
from typing import Any

import pytest
import torch

from gptlab.data.tokenizers import ByteTokenizer
from gptlab.evaluation import Item, choice_loglikelihoods, summarize
from gptlab.evaluation.scoring import encode_items, score_requests
from gptlab.model.masks import Documents
from tests.interop.helpers import perturbed_gpt

CPU = torch.device("cpu")
TOL = 2e-5
REL = 1e-6
EOT = 255
VARIANTS: dict[str, tuple[dict[str, Any], Documents | None]] = {
    "rope": ({}, None),
    "learned": ({"pos_emb": "learned"}, None),
    "window+nope": ({"window": 6, "window_pattern": "SL", "nope_every": 2}, None),
    "softcap+gqa": ({"attn_softcap": 5.0, "n_kv_head": 2}, None),
    # learned positions: RoPE's are relative, so a restart would not show under it
    "documents restart": ({"pos_emb": "learned"}, Documents(EOT)),
    "documents restart+rope": ({}, Documents(EOT)),
    "documents continue": ({"window": 9}, Documents(EOT, "continue")),
}


def requests(seed: int, items: int = 12, block: int = 64) -> list[tuple[list[int], int]]:
    """Items of 1-5 choices sharing a context of 1-48 tokens, continuations of 1-15 tokens, end-of-text
    ids sprinkled in (documents inside a request), shuffled so one context's requests are apart."""
    rng = random.Random(seed)
    token = lambda: rng.choice([EOT] * 4 + list(range(200)))  # noqa: E731
    out = []
    for _ in range(items):
        context = [token() for _ in range(rng.randint(1, 48))]
        for _ in range(rng.randint(1, 5)):
            n = rng.randint(1, 15)
            out.append((context + [token() for _ in range(n)], n))
    assert all(len(t) <= block + 1 for t, _ in out)
    rng.shuffle(out)
    return out


def alone(model: torch.nn.Module, tokens: list[int], n_cont: int) -> tuple[float, bool]:
    """One request by itself: Σ log p(continuation token), and whether each is the argmax."""
    with torch.no_grad():
        logp = torch.log_softmax(model(torch.tensor([tokens[:-1]])).double(), dim=-1)[0]
    at = range(len(tokens) - n_cont, len(tokens))
    ll = sum(float(logp[p - 1, tokens[p]]) for p in at)
    return ll, all(int(logp[p - 1].argmax()) == tokens[p] for p in at)


@pytest.mark.parametrize("name", list(VARIANTS))
def test_each_request_scores_as_it_does_alone(name: str) -> None:
    overrides, documents = VARIANTS[name]
    model = perturbed_gpt(overrides, scale=0.3)
    model.documents = documents
    encoded = requests(seed=len(name))
    for batch in (1, 7, 64):
        got = score_requests(model, encoded, batch, CPU)
        want = [alone(model, t, n) for t, n in encoded]
        assert [ll for ll, _ in got] == pytest.approx([ll for ll, _ in want], abs=TOL, rel=REL), (name, batch)
        assert [g for _, g in got] == [g for _, g in want], (name, batch)


class Counter:
    """Counts the tokens a model's forwards read (a forward pre-hook), padding included."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.tokens = self.forwards = 0
        model.register_forward_pre_hook(self.hook, with_kwargs=True)

    def hook(self, module: Any, args: tuple, kwargs: dict) -> None:
        self.tokens += args[0].numel()
        self.forwards += 1


def test_a_context_is_run_once_for_all_its_choices() -> None:
    """Four 16-token choices of a 40-token context: 40 + 4 × 15 = 100 token-forwards, not 4 × 55 = 220;
    as many forwards as one request a row would take (FSDP ranks count on it: callbacks/tasks.py)."""
    model = perturbed_gpt(scale=0.3)
    counter = Counter(model)
    context = list(range(100, 140))
    encoded = [(context + [j] * 16, 16) for j in range(4)]
    score_requests(model, encoded, 16, CPU)
    assert (counter.tokens, counter.forwards) == (100, 1)
    score_requests(model, encoded, 3, CPU)  # batches of 3 + 1 requests: the context runs twice
    assert (counter.tokens - 100, counter.forwards - 1) == ((40 + 3 * 15) + (40 + 15), 2)


def test_a_row_longer_than_two_blocks_is_cut_into_rows() -> None:
    """Ten 60-token choices of one 5-token context are 5 + 10 × 59 = 595 packed tokens: rows of at most
    2 × 64 = 128, each request still scored as alone."""
    model = perturbed_gpt(scale=0.3)
    counter = Counter(model)
    encoded = [([1, 2, 3, 4, 5, *[j + 10] * 60], 60) for j in range(10)]
    got = score_requests(model, encoded, 16, CPU)
    assert counter.tokens <= 5 * 128 and counter.forwards == 1
    want = [alone(model, t, n) for t, n in encoded]
    assert [ll for ll, _ in got] == pytest.approx([ll for ll, _ in want], abs=TOL, rel=REL)


def test_task_metrics_are_those_of_the_requests_alone() -> None:
    """acc, acc_norm and bpb from the packed scores equal those of summing the alone scores."""
    model = perturbed_gpt(scale=0.3)
    items = [
        Item("The cat sat on the", ("mat.", "moon, then flew away.", "dog"), 0, " "),
        Item("def add(a, b):", ("\n    return a + b", " pass"), 0),
        Item("1 2 3 4", (" 5", " five", " 6 7 8 9 10 11 12"), 2),
        Item("Grüße aus", (" Köln", " Paris, ça va"), 1),
    ]
    result = choice_loglikelihoods(model, ByteTokenizer(), items, 4, CPU)
    encoded, _ = encode_items(ByteTokenizer(), items, 64)
    flat = iter(alone(model, t, n)[0] for t, n in encoded)
    want = [[next(flat) for _ in item.choices] for item in items]
    for got_row, want_row in zip(result.loglikelihoods, want, strict=True):
        assert got_row == pytest.approx(want_row, abs=TOL)
    m = summarize(result)
    right = [max(range(len(w)), key=w.__getitem__) == it.label for w, it in zip(want, items, strict=True)]
    assert m["acc"] == sum(right) / len(items)
