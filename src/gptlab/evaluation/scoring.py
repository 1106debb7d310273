"""Log-likelihood of each choice's continuation given its context, and the task metrics from them.

A request is one (context, continuation) pair. As lm-eval-harness splits it: trailing whitespace of
the context moves to the continuation, the whole string is encoded and the continuation's tokens are the
ones after the context's own encoding. Only continuation tokens are scored. A GPT scores the requests
of one context in one row, the context once (evaluation/shared_prefix.py); other models' requests are
batched longest first and right-padded: GPT.forward is causal, so padding after a sequence leaves its
real positions' logits unchanged. Either way the batch size changes the numbers only by float rounding
(acc and acc_norm agree; log-likelihoods to ~1e-6). A sequence longer than
block_size + 1 tokens loses tokens from the left of its context (counted in `cut`).
`score_requests` is the part the lm-eval bridge (lm_eval_model) shares, so both give the same numbers.
A task's encoded requests (`EncodedTask`, from `encode_task`) depend only on its items, the tokenizer
and block_size: the in-loop callback encodes them once per run and keeps what the packed scorer
builds from them (shared_prefix.plan) for every evaluation.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from tqdm import tqdm

from gptlab.evaluation import shared_prefix
from gptlab.evaluation.formats import Item


@dataclass
class TaskResult:
    """Per item: each choice's log-likelihood (nats) and token count; `cut`: items whose context
    was cut from the left."""

    items: list[Item]
    loglikelihoods: list[list[float]]
    tokens: list[list[int]]
    cut: int


def split_request(context: str, continuation: str) -> tuple[str, str]:
    """lm-eval's split (TemplateLM._encode_pair): the context's trailing whitespace (spaces, newlines)
    belongs to the continuation."""
    n = len(context) - len(context.rstrip())
    return (context[:-n], context[-n:] + continuation) if n else (context, continuation)


def encode_request(tokenizer: Any, context: str, continuation: str, where: str = "") -> tuple[list[int], int]:
    """(context tokens + continuation tokens, how many are the continuation's), as lm-eval's
    TemplateLM.loglikelihood makes them: the context is its own encoding, and the continuation's
    tokens are those of the whole string's encoding after as many tokens as the context has.

    Where the tokenizer merges across the boundary the sequence scored is not the whole string's
    encoding: "class Stac" + "k:" is the tokens of "class Stac" followed by those of "class Stack:"
    from the same position on, which may be only ":". An empty context is the end-of-text token
    (lm-eval's prefix token when a tokenizer has no BOS; gptlab's have none), or the continuation's
    own first token when that is it.
    """
    if context == "":  # lm-eval tests the context before its split: "" only, not whitespace
        return _prefixed(tokenizer, continuation, where)
    context, continuation = split_request(context, continuation)
    whole = [int(t) for t in tokenizer.encode(context + continuation)]
    head = [int(t) for t in tokenizer.encode(context)]
    tail = whole[len(head) :]
    if not tail:
        raise ValueError(
            f"{where}the continuation {continuation!r} adds no tokens after its context (the tokenizer "
            "merges it into the context's last token); accepted: a choice that starts a new token, e.g. "
            "after a space"
        )
    return head + tail, len(tail)


def _prefixed(tokenizer: Any, continuation: str, where: str) -> tuple[list[int], int]:
    """An empty context's request: [EOS] + the continuation's tokens, or the continuation's tokens
    alone (the first one unscored) when they start with EOS."""
    prefix = getattr(tokenizer, "eos_id", None)
    if prefix is None:
        raise ValueError(
            f"{where}an empty context is scored after the end-of-text token, which the tokenizer "
            f"{getattr(tokenizer, 'name', '')!r} does not have; accepted: a non-empty context"
        )
    cont = [int(t) for t in tokenizer.encode(continuation)]
    if cont and cont[0] == int(prefix):
        return cont, len(cont) - 1
    return [int(prefix), *cont], len(cont)


def requests(items: list[Item]) -> list[tuple[int, int, str, str]]:
    """(item index, choice index, context, continuation) for every choice of every item."""
    return [
        (i, j, item.context, item.delimiter + choice)
        for i, item in enumerate(items)
        for j, choice in enumerate(item.choices)
    ]


def _batch_loglikelihoods(
    model: Any, batch: list[tuple[list[int], int]], device: torch.device
) -> list[tuple[float, bool]]:
    """(Σ log p(continuation token), whether greedy decoding gives the continuation) for each
    (tokens, n_cont) of one right-padded batch.

    Only each row's continuation positions go through log_softmax, on the model's device, so a
    batch never holds a (batch, time, vocab) float copy beyond the logits themselves.
    """
    width = max(len(tokens) - 1 for tokens, _ in batch)
    idx = torch.zeros(len(batch), width, dtype=torch.long)
    for row, (tokens, _) in enumerate(batch):
        idx[row, : len(tokens) - 1] = torch.tensor(tokens[:-1])
    logits = model(idx.to(device))
    out = []
    for row, (tokens, n_cont) in enumerate(batch):
        n_in = len(tokens) - 1
        first = n_in - n_cont  # the position whose logits predict the continuation's first token
        targets = torch.tensor(tokens[first + 1 :], device=logits.device)
        logp = torch.log_softmax(logits[row, first:n_in].float(), dim=-1)
        greedy = bool((logp.argmax(dim=-1) == targets).all())
        out.append((float(logp.gather(-1, targets[:, None]).double().sum()), greedy))
    return out


def fit_block(tokens: list[int], n_cont: int, block: int, where: str) -> tuple[list[int], bool]:
    """(the request's last block_size + 1 tokens, whether its context lost some); a continuation
    longer than block_size cannot be scored and is refused."""
    if n_cont > block:
        raise ValueError(
            f"{where} is {n_cont} tokens long, more than model.block_size={block}; "
            f"accepted: continuations of at most {block} tokens"
        )
    if len(tokens) > block + 1:
        return tokens[-(block + 1) :], True
    return tokens, False


def score_requests(
    model: Any,
    encoded: list[tuple[list[int], int]],
    batch_size: int,
    device: torch.device,
    plan: Callable[[int], list[shared_prefix.Batch]] | None = None,
) -> list[tuple[float, bool]]:
    """(log-likelihood, is_greedy) of each (tokens, n_cont) request, each at most block_size + 1
    tokens; returned in the requests' order. A GPT scores the requests of one context in one row
    (evaluation/shared_prefix.py), in the forwards `plan` gives for a batch size when the caller
    keeps them (EncodedTask.plan); another model, one request a row, batched longest first."""
    if shared_prefix.packs(model):
        if plan is None:
            batches = shared_prefix.plan(encoded, batch_size, int(model.cfg.block_size))
        else:
            batches = plan(batch_size)
        with torch.inference_mode():
            return shared_prefix.score_plan(model, batches, len(encoded), device)
    order = sorted(range(len(encoded)), key=lambda k: -len(encoded[k][0]))
    out: list[tuple[float, bool]] = [(0.0, False)] * len(encoded)
    starts = range(0, len(order), batch_size)
    with torch.inference_mode():
        for start in tqdm(starts, desc="score requests", unit="batch", disable=None, leave=False):
            chunk = order[start : start + batch_size]
            for k, res in zip(
                chunk, _batch_loglikelihoods(model, [encoded[k] for k in chunk], device), strict=True
            ):
                out[k] = res
    return out


def encode_items(
    tokenizer: Any, items: list[Item], block: int
) -> tuple[list[tuple[list[int], int]], set[int]]:
    """Every request of the items encoded and fitted to block_size: ((tokens, n_cont) per choice,
    the items whose context was cut). A request that cannot be scored (a choice that merges into
    its context, a continuation longer than the block) raises, naming the item and choice: callers
    that must refuse a task before training (callbacks/tasks.py) call this first."""
    encoded: list[tuple[list[int], int]] = []
    cut_items: set[int] = set()
    for i, j, context, continuation in requests(items):
        where = f"{items[i].where or f'item {i + 1}'} choice {j}"
        tokens, n_cont = encode_request(tokenizer, context, continuation, f"{where}: ")
        tokens, cut = fit_block(tokens, n_cont, block, where)
        if cut:
            cut_items.add(i)
        encoded.append((tokens, n_cont))
    return encoded, cut_items


@dataclass
class EncodedTask:
    """A task's requests encoded and fitted to `block` (every choice of every item, in order) and
    the items whose context was cut; `plans` keeps the packed scorer's batches per batch size."""

    items: list[Item]
    requests: list[tuple[list[int], int]]
    cut_items: set[int]
    block: int
    plans: dict[int, list[shared_prefix.Batch]] = field(default_factory=dict)

    def share(self, part: range) -> EncodedTask:
        """Items part.start..part.stop - 1 (a rank's share under DDP), their requests and cuts."""
        first = sum(len(item.choices) for item in self.items[: part.start])
        mine = self.items[part.start : part.stop]
        n = sum(len(item.choices) for item in mine)
        cut = {i - part.start for i in self.cut_items if i in part}
        return EncodedTask(mine, self.requests[first : first + n], cut, self.block)

    def plan(self, batch_size: int) -> list[shared_prefix.Batch]:
        """The packed scorer's forwards, built at the first call for this batch size."""
        if batch_size not in self.plans:
            self.plans[batch_size] = shared_prefix.plan(self.requests, batch_size, self.block)
        return self.plans[batch_size]


def encode_task(tokenizer: Any, items: list[Item], block: int) -> EncodedTask:
    """The items' requests encoded with `tokenizer` and fitted to `block` (raises as encode_items)."""
    encoded, cut_items = encode_items(tokenizer, items, block)
    return EncodedTask(items, encoded, cut_items, block)


def score_task(model: Any, task: EncodedTask, batch_size: int, device: torch.device) -> TaskResult:
    """Every choice's log-likelihood given its context, from the task's encoded requests."""
    if int(model.cfg.block_size) != task.block:
        raise ValueError(
            f"the task was encoded for block_size={task.block}, the model has {model.cfg.block_size}"
        )
    scored = score_requests(model, task.requests, batch_size, device, plan=task.plan)
    lls: list[list[float]] = []
    n_tokens: list[list[int]] = []
    k = 0
    for item in task.items:
        n = len(item.choices)
        lls.append([ll for ll, _ in scored[k : k + n]])
        n_tokens.append([n_cont for _, n_cont in task.requests[k : k + n]])
        k += n
    return TaskResult(task.items, lls, n_tokens, len(task.cut_items))


def choice_loglikelihoods(
    model: Any, tokenizer: Any, items: list[Item], batch_size: int, device: torch.device
) -> TaskResult:
    """Every choice's log-likelihood given its context; long contexts cut from the left."""
    return score_task(model, encode_task(tokenizer, items, int(model.cfg.block_size)), batch_size, device)


def _argmax(values: list[float]) -> int:
    """The first index of the largest value (ties go to the earlier choice, as numpy's argmax)."""
    return max(range(len(values)), key=lambda k: (values[k], -k))


def per_byte(item: Item, loglikelihoods: list[float], n_tokens: list[int]) -> list[float]:
    """Each choice's log-likelihood over its length in UTF-8 bytes, the delimiter not counted.

    lm-eval-harness's acc_norm divides by len(choice), in characters; issue 38 asks for bytes.
    The two agree on ASCII and differ on other text (docs/evaluation.md). `n_tokens` is unused:
    dividing by tokens would make the number depend on the tokenizer.
    """
    return [ll / len(c.encode("utf-8")) for ll, c in zip(loglikelihoods, item.choices, strict=True)]


def summarize(result: TaskResult) -> dict[str, float]:
    """acc, acc_norm, items, chance, and the bits per byte of the right continuations."""
    acc = acc_norm = 0
    nats = 0.0
    n_bytes = 0
    for item, ll, n_tok in zip(result.items, result.loglikelihoods, result.tokens, strict=True):
        acc += _argmax(ll) == item.label
        acc_norm += _argmax(per_byte(item, ll, n_tok)) == item.label
        nats -= ll[item.label]
        # the bytes scored: the continuation as split (a context's trailing whitespace moved to it)
        scored = split_request(item.context, item.delimiter + item.choices[item.label])[1]
        n_bytes += len(scored.encode("utf-8"))
    n = len(result.items)
    return {
        "acc": acc / n,
        "acc_norm": acc_norm / n,
        "items": n,
        "chance": sum(1 / len(item.choices) for item in result.items) / n,
        "bpb": nats / math.log(2) / n_bytes,
        "cut": result.cut,
    }
