"""Multiple-choice scoring against oracles that share none of its code.

`Unigram` predicts the same byte distribution at every position, with probabilities that are
powers of two, so each choice's log-likelihood is a sum of whole bits worked out by hand below.
A tiny real GPT is checked against plain torch.log_softmax over the concatenated context + choice.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from gptlab.data.tokenizers import ByteTokenizer
from gptlab.evaluation import Item, choice_loglikelihoods, summarize
from tests.interop.helpers import perturbed_gpt

CPU = torch.device("cpu")
LN2 = math.log(2)
# bits per byte under Unigram: ' ' 2, a 2, b 3, c 3, 0xC3 3, 0xA9 4 ('é' = C3 A9: 7 bits), z 5;
# the other 249 bytes share the remaining 1/32 (they occur only in contexts, never scored)
BITS = {ord(" "): 2, ord("a"): 2, ord("b"): 3, ord("c"): 3, 0xC3: 3, 0xA9: 4, ord("z"): 5}


class Unigram(torch.nn.Module):
    """Logits log p(byte), the same at every position whatever the input."""

    def __init__(self, block_size: int = 64) -> None:
        super().__init__()
        self.cfg = SimpleNamespace(block_size=block_size)
        p = torch.full((256,), (1 / 32) / (256 - len(BITS)), dtype=torch.float64)
        for byte, bits in BITS.items():
            p[byte] = 2.0**-bits
        assert abs(float(p.sum()) - 1) < 1e-12
        self.logits = p.log().float()

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.logits.expand(*idx.shape, 256)


HAND = [
    # " a" 2+2 = 4 bits, " ab" 2+2+3 = 7: acc picks "a" (wrong); per byte of the choice 4/1 vs 7/2
    # picks "ab" (right); per token (the space counted) 4/2 vs 7/3 would pick "a"
    Item("cab", ("a", "ab"), 1, " "),
    # "b" 3 bits, "aaa" 6: acc picks "b" (right); per byte 3 vs 2 picks "aaa" (wrong)
    Item("ab", ("b", "aaa"), 0),
    # "é" 7 bits in 2 bytes (1 character), "zz" 10 bits in 2: acc and per byte (3.5 vs 5) pick "é"
    # (right); per character, lm-eval's len(choice), 7 vs 5 would pick "zz"
    Item("Où?", ("é", "zz"), 0),
]


def test_three_items_by_hand() -> None:
    result = choice_loglikelihoods(Unigram(), ByteTokenizer(), HAND, 2, CPU)
    bits = [[-v / LN2 for v in row] for row in result.loglikelihoods]
    assert bits == [pytest.approx([4, 7]), pytest.approx([3, 6]), pytest.approx([7, 10])]
    assert result.tokens == [[2, 3], [1, 3], [2, 2]]
    m = summarize(result)
    assert m["acc"] == pytest.approx(2 / 3)  # items 2 and 3
    assert m["acc_norm"] == pytest.approx(2 / 3)  # items 1 and 3
    assert (m["items"], m["cut"]) == (3, 0)
    assert m["chance"] == pytest.approx(1 / 2)
    # right continuations: " ab" 7 bits / 3 bytes, "b" 3 / 1, "é" 7 / 2
    assert m["bpb"] == pytest.approx(17 / 6)


def test_a_context_ending_in_a_space_gives_it_to_the_continuation() -> None:
    """lm-eval's split: "Q: " + "a" is scored as "Q:" + " a" (4 bits, not 2); bpb counts that space."""
    result = choice_loglikelihoods(Unigram(), ByteTokenizer(), [Item("Q: ", ("a", "zz"), 0)], 1, CPU)
    assert [-v / LN2 for v in result.loglikelihoods[0]] == pytest.approx([4, 12])
    assert summarize(result)["bpb"] == pytest.approx(4 / 2)


def test_a_context_ending_in_a_newline_gives_it_to_the_continuation() -> None:
    """lm-eval strips all trailing whitespace (str.rstrip()): "Q:\n" + "a" scores "\na", the newline
    one of the 249 bytes sharing 1/32 (5 + log2 249 bits), then "a" (2 bits)."""
    result = choice_loglikelihoods(Unigram(), ByteTokenizer(), [Item("Q:\n", ("a", "zz"), 0)], 1, CPU)
    newline = 5 + math.log2(249)
    assert [-v / LN2 for v in result.loglikelihoods[0]] == pytest.approx([newline + 2, newline + 10])
    assert summarize(result)["bpb"] == pytest.approx((newline + 2) / 2)


def direct_loglikelihood(model: torch.nn.Module, context: str, continuation: str) -> float:
    """Plain torch: log_softmax of the logits of context+continuation, the continuation's bytes summed."""
    ids = list((context + continuation).encode("utf-8"))
    n_ctx = len(context.encode("utf-8"))
    with torch.no_grad():
        logp = torch.log_softmax(model(torch.tensor([ids[:-1]])).double(), dim=-1)[0]
    return sum(float(logp[p - 1, ids[p]]) for p in range(n_ctx, len(ids)))


ITEMS = [
    Item("The cat sat on the", ("mat.", "moon, then flew away.", "dog"), 0, " "),
    Item("def add(a, b):", ("\n    return a + b", " pass"), 0),
    Item("1 2 3 4", (" 5", " five", " 6 7 8 9 10 11 12"), 2),
    Item("Grüße aus", (" Köln", " Paris, ça va"), 1),
]


@pytest.fixture(scope="module")
def gpt() -> torch.nn.Module:
    return perturbed_gpt(scale=0.3)


def test_loglikelihoods_equal_plain_log_softmax_on_the_concatenation(gpt: torch.nn.Module) -> None:
    result = choice_loglikelihoods(gpt, ByteTokenizer(), ITEMS, 3, CPU)
    want = [[direct_loglikelihood(gpt, it.context, it.delimiter + c) for c in it.choices] for it in ITEMS]
    for got_row, want_row in zip(result.loglikelihoods, want, strict=True):
        assert got_row == pytest.approx(want_row, abs=1e-4)
    m = summarize(result)
    right = [max(range(len(w)), key=w.__getitem__) == it.label for w, it in zip(want, ITEMS, strict=True)]
    assert m["acc"] == sum(right) / len(ITEMS)
    per_byte = [
        max(range(len(w)), key=lambda k: w[k] / len(it.choices[k].encode())) == it.label
        for w, it in zip(want, ITEMS, strict=True)
    ]
    assert m["acc_norm"] == sum(per_byte) / len(ITEMS)
    bits = -sum(w[it.label] for w, it in zip(want, ITEMS, strict=True)) / LN2
    n_bytes = sum(len((it.delimiter + it.choices[it.label]).encode()) for it in ITEMS)
    assert m["bpb"] == pytest.approx(bits / n_bytes, rel=1e-5)


def test_the_same_numbers_at_any_batch_size(gpt: torch.nn.Module) -> None:
    runs = [choice_loglikelihoods(gpt, ByteTokenizer(), ITEMS, b, CPU) for b in (1, 2, 5, 16)]
    first = summarize(runs[0])
    for other in runs[1:]:
        for a, b in zip(other.loglikelihoods, runs[0].loglikelihoods, strict=True):
            assert a == pytest.approx(b, abs=1e-5)
        m = summarize(other)
        assert (m["acc"], m["acc_norm"], m["items"]) == (first["acc"], first["acc_norm"], first["items"])
        assert m["bpb"] == pytest.approx(first["bpb"], rel=1e-6)


def test_long_contexts_are_cut_from_the_left_and_counted(gpt: torch.nn.Module) -> None:
    long = Item("x" * 100 + " the end:", (" yes", " no"), 0)
    result = choice_loglikelihoods(gpt, ByteTokenizer(), [long, ITEMS[0]], 2, CPU)
    assert result.cut == 1 and summarize(result)["cut"] == 1
    ids = list((long.context + " yes").encode())[-65:]  # block_size 64 inputs + the last target
    with torch.no_grad():
        logp = torch.log_softmax(gpt(torch.tensor([ids[:-1]])).double(), dim=-1)[0]
    want = sum(float(logp[p - 1, ids[p]]) for p in range(len(ids) - 4, len(ids)))
    assert result.loglikelihoods[0][0] == pytest.approx(want, abs=1e-4)
    # the uncut item is scored as if alone
    alone = choice_loglikelihoods(gpt, ByteTokenizer(), [ITEMS[0]], 1, CPU)
    assert result.loglikelihoods[1] == pytest.approx(alone.loglikelihoods[0], abs=1e-5)


def test_a_continuation_longer_than_block_size_is_refused() -> None:
    with pytest.raises(ValueError, match="more than model.block_size=4"):
        choice_loglikelihoods(Unigram(block_size=4), ByteTokenizer(), [Item("Q", ("abcde", "a"), 0)], 1, CPU)
