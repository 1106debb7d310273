"""BPE training cuts pre-tokens longer than MAX_PIECE_CHARS (issue 37, item 3): what the trainers read
is bounded, a hand-cut corpus trains to the same BPE, ordinary text to the BPE it trained to before,
and tiktoken's ids still equal `tokenizers`' on the runs.

Oracles: the `regex` module's GPT-2 split (the pattern written out here) and `tokenizers`' own
ByteLevel pre-tokenizer for what a piece splits into; plain `tokenizers`/rustbpe trainers, set up
here as gptlab set them up before the bound, for the BPE a corpus must train to."""

from __future__ import annotations

import json
import random
import sysconfig
from pathlib import Path

import pytest
import tokenizers
from tokenizers import decoders, models, pre_tokenizers, trainers

from gptlab.data.tokenizers import BPETokenizer
from gptlab.data.tokenizers.long_pieces import MAX_PIECE_CHARS, bounded_texts
from gptlab.data.tokenizers.tiktoken_bpe import to_tiktoken

regex = pytest.importorskip("regex")

PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""  # GPT-2's
BYTE_LEVEL = pre_tokenizers.ByteLevel(add_prefix_space=False)
M = 256  # the bound docs/data.md states


def test_the_bound_is_the_documented_one() -> None:
    assert MAX_PIECE_CHARS == M


def gpt2_pieces(text: str) -> list[str]:
    return regex.findall(PATTERN, text)


def trainer_pieces(text: str) -> list[str]:
    """The pre-tokens `tokenizers`' trainer makes of one text, as substrings of it."""
    return [text[a:b] for _, (a, b) in BYTE_LEVEL.pre_tokenize_str(text)]


def expected_pieces(text: str, m: int) -> list[str]:
    """Each GPT-2 pre-token of text, the long ones in chunks of m characters."""
    return [p[i : i + m] for p in gpt2_pieces(text) for i in range(0, len(p), m)]


RUN_CHARS = "aZ9-=_#.\u00e9\u65e5\U0001f642 \n\t\u3000\u00a0\u2003\x0b\x0c\r\x1c\u200b"
WORDS = ["the", " cat", " it's", " 42", ",", " \u65e5\u672c", "\n", "  ", " \u00e9t\u00e9", " --"]


def random_text(rng: random.Random, m: int) -> str:
    """Ordinary words around runs of one or two characters of every class, of lengths about m."""
    parts: list[str] = []
    for _ in range(rng.randint(1, 6)):
        parts += rng.choices(WORDS, k=rng.randint(0, 8))
        n = rng.choice([m - 1, m, m + 1, m + 2, 2 * m, 2 * m + 1, 3 * m + 5, rng.randint(1, 4 * m)])
        chars = rng.sample(RUN_CHARS, rng.choice([1, 1, 2]))
        run = "".join(rng.choice(chars) for _ in range(n))
        parts.append(rng.choice(["", " "]) + run)
    return "".join(parts)


@pytest.mark.parametrize("m", [8, M])
def test_no_pre_token_the_trainers_read_is_longer_than_the_bound(m: int) -> None:
    """Every text the trainers read splits (by the trainer's own pre-tokenizer) into pre-tokens of
    at most m characters; together a text's pieces are the text, its pre-tokens of up to m
    characters whole and each longer one in m-character chunks (the `regex` module's GPT-2 split)."""
    rng = random.Random(37)
    texts = [random_text(rng, m) for _ in range(300)]
    assert max(len(p) for t in texts for p in gpt2_pieces(t)) > 3 * m  # the bound has work to do
    for text in texts:
        pieces = list(bounded_texts([text], m))
        assert "".join(pieces) == text
        cut = [p for piece in pieces for p in trainer_pieces(piece)]
        assert max(len(p) for p in cut) <= m, text[:80]
        assert cut == expected_pieces(text, m), text[:80]


def test_texts_without_long_pre_tokens_reach_the_trainer_as_they_are() -> None:
    texts = ["x" * M, " " + "y" * (M - 1), " " * (M + 1) + "w", "\u3000" * M, "", "a b", "z" * (M + 1)]
    assert list(bounded_texts(texts)) == texts[:-1] + ["z" * M, "z"]
    assert list(bounded_texts(["q" * 5000], None)) == ["q" * 5000]  # None: uncut


def plain_hf_bpe(texts: list[str], vocab_size: int) -> tokenizers.Tokenizer:
    """gptlab's `tokenizers` BPE as it was trained before the bound: every text whole."""
    tok = tokenizers.Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    return tok


def plain_rustbpe_ranks(texts: list[str], vocab_size: int) -> dict[bytes, int]:
    rustbpe = pytest.importorskip("rustbpe")
    tok = rustbpe.Tokenizer()
    tok.train_from_iterator(iter(texts), vocab_size - 1, pattern=PATTERN)
    return dict(tok.get_mergeable_ranks())


def model_of(tok: tokenizers.Tokenizer) -> tuple[dict[str, int], list]:
    model = json.loads(tok.to_str())["model"]
    return model["vocab"], model["merges"]


STORY = "Once upon a time the cat sat on the mat, and it's 2026 now. " * 40
# one document with three long pre-tokens, and the same text cut by hand (M = 256): " " + 1000
# letters (1001 characters: 255 + 1 after the space, 256, 256, 233), " " + 700 dashes (256, 256,
# 189), and "\n" + 599 spaces before " z" (600: 256, 256, 88)
LONG_DOC = STORY + "x " + "a" * 1000 + " y " + "-" * 700 + "\n" + " " * 600 + "z end."
HAND_CUT = [
    STORY + "x " + "a" * 255,
    "a" * 256,
    "a" * 256,
    "a" * 233 + " y " + "-" * 255,
    "-" * 256,
    "-" * 189 + "\n" + " " * 255,
    " " * 256,
    " " * 88 + " z end.",
]


def test_the_hand_cut_corpus_is_the_document() -> None:
    assert "".join(HAND_CUT) == LONG_DOC
    assert max(len(p) for t in HAND_CUT for p in gpt2_pieces(t)) == 256


def test_tokenizers_trains_on_long_runs_as_on_the_corpus_cut_by_hand() -> None:
    got = BPETokenizer.train([STORY, LONG_DOC], 420)
    want = plain_hf_bpe([STORY, *HAND_CUT], 420)
    assert model_of(got.tok) == model_of(want)
    assert model_of(plain_hf_bpe([STORY, LONG_DOC], 420)) != model_of(want)  # the cut matters here


def test_rustbpe_trains_on_long_runs_as_on_the_corpus_cut_by_hand() -> None:
    got = to_tiktoken(BPETokenizer.train_rustbpe([STORY, LONG_DOC], 420).tok)
    want = plain_rustbpe_ranks([STORY, *HAND_CUT], 420)
    assert {t: r for t, r in got._mergeable_ranks.items()} == want
    assert plain_rustbpe_ranks([STORY, LONG_DOC], 420) != want


def ordinary_corpus() -> list[str]:
    """Real text without a pre-token over M characters: some of this interpreter's stdlib sources,
    and pre-tokens of exactly M characters (a word, a space and a word, a whitespace run)."""
    stdlib = Path(sysconfig.get_path("stdlib"))
    names = ["textwrap.py", "shlex.py", "fnmatch.py", "bisect.py", "colorsys.py", "heapq.py"]
    texts = [(stdlib / n).read_text() for n in names if (stdlib / n).is_file()]
    texts += ["q" * M, "a" + " " + "b" * (M - 1), "end" + " " * (M + 1) + "w", "\u3000" * M + "x"]
    return texts


def test_ordinary_text_trains_to_the_same_bpe_as_before_the_bound() -> None:
    texts = ordinary_corpus()
    longest = max(len(p) for t in texts for p in gpt2_pieces(t))
    assert longest == M and len(texts) > 6  # up to the bound, not over it
    got, want = BPETokenizer.train(texts, 1500), plain_hf_bpe(texts, 1500)
    assert got.tok.to_str() == want.to_str()
    assert got.vocab_size == 1500


def test_ordinary_text_trains_rustbpe_to_the_same_merges_as_before_the_bound() -> None:
    texts = ordinary_corpus()
    got = to_tiktoken(BPETokenizer.train_rustbpe(texts, 1500).tok)
    assert dict(got._mergeable_ranks) == plain_rustbpe_ranks(texts, 1500)


@pytest.mark.parametrize("trainer", ["tokenizers", "rustbpe"])
def test_tiktoken_ids_equal_tokenizers_on_runs_after_cut_training(trainer: str) -> None:
    """Training is cut, encoding is not: both encoders split GPT-2's way and merge inside each whole
    pre-token, so on runs of any length (around multiples of M, and 20k) their ids agree, and no
    learned token is longer than M characters."""
    if trainer == "rustbpe":
        pytest.importorskip("rustbpe")
    train = BPETokenizer.train if trainer == "tokenizers" else BPETokenizer.train_rustbpe
    runs = [c * n for c in "a- " for n in (3000, 20_011)] + ["ACGT" * 900]
    bpe = train([STORY, *runs, STORY], 600)
    enc = to_tiktoken(bpe.tok)
    assert max(len(t) for t in enc._mergeable_ranks) <= M  # ASCII: characters are bytes
    probes = [f"go {c * n} stop" for c in "ab-= \n" for n in (M - 1, M, M + 1, 2 * M + 1, 999, 20_000)]
    for text in [*probes, LONG_DOC, "ACGT" * 1000]:
        assert enc.encode_ordinary(text) == bpe.tok.encode(text).ids, text[:20]
        assert bpe.decode(bpe.tok.encode(text).ids) == text
