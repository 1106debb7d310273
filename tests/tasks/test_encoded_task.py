"""A task encoded once and scored at every evaluation (scoring.EncodedTask, the in-loop callback's path).

The callback keeps each task's encoded requests and the packed scorer's batches built from them
(shared_prefix.plan) for the whole run; what it keeps must hold no scores. Oracle: plain torch in
this file, per choice the model's forward on the bytes of context + choice alone, log_softmax, and
the sum over the choice's bytes (lm-eval's split: the context's own bytes, then the rest).

Tolerance 2e-5 nats or 1e-6 relative, as tests/tasks/test_shared_prefix.py argues: the packed row
goes through SDPA's masked kernel, the request alone through its causal one.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from gptlab.data.tokenizers import ByteTokenizer
from gptlab.evaluation import Item
from gptlab.evaluation.scoring import encode_task, score_task
from tests.interop.helpers import perturbed_gpt

CPU = torch.device("cpu")
TOL, REL = 2e-5, 1e-6
ITEMS = [
    Item("The cat sat on the", ("mat.", "moon, then flew away.", "dog"), 0, " "),
    Item("def add(a, b):", ("\n    return a + b", " pass"), 0),
    Item("x" * 90 + " the end:", (" yes", " no"), 1),  # 100 bytes: cut to block_size 64
    Item("1 2 3 4", (" 5", " five", " 6 7 8 9 10 11 12", " 4"), 2),
    Item("Grüße aus", (" Köln", " Paris, ça va"), 1),
]


def oracle(model: torch.nn.Module, item: Item) -> list[float]:
    """Each choice's Σ log p over its bytes, its context + choice through the model alone (the
    last block_size + 1 bytes: the scorer cuts long contexts from the left)."""
    out = []
    for choice in item.choices:
        ids = list((item.context + item.delimiter + choice).encode("utf-8"))
        n_cont = len((item.delimiter + choice).encode("utf-8"))
        ids = ids[-(model.cfg.block_size + 1) :]
        with torch.no_grad():
            logp = torch.log_softmax(model(torch.tensor([ids[:-1]])).double(), dim=-1)[0]
        out.append(sum(float(logp[p - 1, ids[p]]) for p in range(len(ids) - n_cont, len(ids))))
    return out


def check(model: torch.nn.Module, got: list[list[float]]) -> None:
    for item, row in zip(ITEMS, got, strict=True):
        assert row == pytest.approx(oracle(model, item), abs=TOL, rel=REL), item.context


def test_a_kept_task_scores_the_weights_of_each_evaluation() -> None:
    """Scored, the weights moved (a training interval), scored again with the same kept task: each
    evaluation equals the oracle on that evaluation's weights, and the second reused the plan."""
    model = perturbed_gpt(scale=0.3)
    task = encode_task(ByteTokenizer(), ITEMS, 64)
    first = score_task(model, task, 3, CPU)
    check(model, first.loglikelihoods)
    plan = task.plans[3]
    with torch.no_grad():
        g = torch.Generator().manual_seed(1)
        for p in model.parameters():
            p.add_(0.1 * torch.randn(p.shape, generator=g))
    second = score_task(model, task, 3, CPU)
    assert task.plans[3] is plan
    check(model, second.loglikelihoods)
    pairs = zip(sum(first.loglikelihoods, []), sum(second.loglikelihoods, []), strict=True)
    moved = max(abs(a - b) for a, b in pairs)
    assert moved > 1e-2  # the oracle tells the two evaluations apart
    assert (second.cut, second.tokens[2]) == (1, [4, 3])


class Forwards:
    """Counts the model's forwards (a forward pre-hook)."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.n = 0
        model.register_forward_pre_hook(self.hook)

    def hook(self, module: Any, args: tuple) -> None:
        self.n += 1


def test_kept_plans_follow_the_batch_size() -> None:
    """Four requests of one context: one forward at batch_size 16, two at 3 (3 + 1), on one kept
    task (FSDP ranks count forwards by batch_size: callbacks/tasks.py)."""
    model = perturbed_gpt(scale=0.3)
    counter = Forwards(model)
    task = encode_task(ByteTokenizer(), [ITEMS[3]], 64)
    big = score_task(model, task, 16, CPU)
    assert counter.n == 1
    small = score_task(model, task, 3, CPU)
    assert counter.n == 3
    assert small.loglikelihoods[0] == pytest.approx(big.loglikelihoods[0], abs=TOL)


@pytest.mark.parametrize("part", [range(0, 2), range(1, 4), range(2, 5), range(5, 5)])
def test_a_share_is_the_task_of_its_items(part: range) -> None:
    """A rank's share (DDP) holds its items' requests and cut items, as if encoded alone."""
    tokenizer = ByteTokenizer()
    share = encode_task(tokenizer, ITEMS, 64).share(part)
    alone = encode_task(tokenizer, ITEMS[part.start : part.stop], 64)
    assert (share.items, share.requests, share.cut_items) == (alone.items, alone.requests, alone.cut_items)
    model = perturbed_gpt(scale=0.3)
    got = score_task(model, share, 16, CPU)
    assert len(got.loglikelihoods) == len(part)
    for item, row in zip(share.items, got.loglikelihoods, strict=True):
        assert row == pytest.approx(oracle(model, item), abs=TOL, rel=REL)
