"""The bounded BPE training sample (data.bpe_train_bytes, issue 23 item 4): at most the budget, spread
over the whole train split, in the cache key only when it changes what is read."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from gptlab.data.config import DataConfig
from gptlab.data.packing import prepare_tokens
from gptlab.data.resolve import resolve
from gptlab.data.tokenizers import build_tokenizer, training_sample
from gptlab.data.tokenizers.bpe import SampleCount, sample_line

# Two "sources" concatenated one after the other, as a corpus built source by source is: a sample
# of the first bytes would see only the first one's words.
FIRST = ["alpha", "beta", "gamma", "delta"]
SECOND = ["kiwi", "mango", "papaya", "lemon"]


def _doc(words: list[str], i: int) -> str:
    return " ".join(words[(i + k) % len(words)] for k in range(40)) + "\n"


def _two_source_docs(n: int = 120) -> list[str]:
    return [_doc(FIRST, i) for i in range(n // 2)] + [_doc(SECOND, i) for i in range(n // 2)]


def test_sample_is_spread_over_the_split_and_bounded() -> None:
    docs = [f"{i:09d}\n" for i in range(1000)]  # 10 bytes each: 10,000 bytes
    kept = [int(t) for t in training_sample(docs, 1000, 10_000)]
    assert 95 <= len(kept) <= 101  # the budget, to within one document
    gaps = np.diff(kept)
    assert kept[0] == 0 and kept[-1] >= 985 and set(gaps.tolist()) == {10}  # every tenth, to the end


def test_sample_counts_utf8_bytes_not_characters() -> None:
    docs = ["é" * 50] * 100  # 100 bytes each, 50 characters
    kept = list(training_sample(docs, 1000, None))
    assert len(kept) == 10


def test_unknown_size_takes_the_first_bytes_and_stops_reading() -> None:
    read = []

    def stream() -> Iterator[str]:
        for i in range(1000):
            read.append(i)
            yield f"{i:09d}\n"

    kept = list(training_sample(stream(), 300, None))
    assert kept == [f"{i:09d}\n" for i in range(30)]
    assert len(read) == 31  # the stream is not read to its end


def test_no_budget_or_a_small_split_reads_everything() -> None:
    docs = [f"{i:09d}\n" for i in range(100)]
    assert list(training_sample(docs, None, None)) == docs
    assert list(training_sample(docs, 5000, 1000)) == docs


@pytest.fixture
def two_source_file(tmp_path: Path) -> Path:
    path = tmp_path / "two_sources.txt"
    path.write_text("<|endoftext|>".join(_two_source_docs()), encoding="utf-8")
    return path


def _merged_whole(tok, word: str) -> bool:
    return len(tok.encode(" " + word)) == 1


@pytest.mark.parametrize("layout", ["streamed", "one_file_per_document"])
def test_bpe_trained_on_a_small_budget_learns_both_sources(
    layout: str, two_source_file: Path, make_cfg: Callable[..., DataConfig], tmp_path: Path
) -> None:
    if layout == "streamed":
        fields = {"source": "text", "path": str(two_source_file), "doc_separator": "<|endoftext|>"}
    else:
        d = tmp_path / "docs"
        d.mkdir()
        for i, text in enumerate(_two_source_docs()):
            (d / f"{i:04d}.txt").write_text(text, encoding="utf-8")
        fields = {"source": "text", "path": str(d)}
    budget = two_source_file.stat().st_size // 6  # a sixth of the corpus
    cfg = make_cfg(**fields, tokenizer="bpe", bpe_vocab_size=320, bpe_train_bytes=budget)
    tok = prepare_tokens(cfg).tokenizer
    assert all(_merged_whole(tok, w) for w in FIRST + SECOND), [
        (w, tok.encode(" " + w)) for w in FIRST + SECOND
    ]


def test_sample_is_in_the_cache_key_only_when_it_cuts(
    two_source_file: Path, make_cfg: Callable[..., DataConfig]
) -> None:
    size = two_source_file.stat().st_size

    def ident(budget: int | None) -> str:
        cfg = make_cfg(source="text", path=str(two_source_file), tokenizer="bpe", bpe_train_bytes=budget)
        return resolve(cfg).tokenizer.identity

    assert ident(None) == ident(size) == ident(1 << 30)  # caches made before the budget stay valid
    assert ident(size // 2) != ident(None) and ident(size // 2) != ident(size // 3)


@pytest.mark.parametrize("bad", [0, -5, "1GB", 1.5, True])
def test_bad_budget_is_refused_by_name(bad: object, make_cfg: Callable[..., DataConfig]) -> None:
    with pytest.raises(ValueError, match=r"data\.bpe_train_bytes=.*bytes > 0, or null"):
        build_tokenizer(resolve(make_cfg(tokenizer="bpe", bpe_train_bytes=bad)).tokenizer, list)


def test_bpe_training_reads_only_its_budget(make_cfg: Callable[..., DataConfig]) -> None:
    read = []

    def documents() -> Iterator[str]:
        for i, text in enumerate(_two_source_docs()):
            read.append(i)
            yield text

    budget = 10 * len(_doc(FIRST, 0).encode())  # ten documents
    build_tokenizer(
        resolve(make_cfg(tokenizer="bpe", bpe_vocab_size=300, bpe_train_bytes=budget)).tokenizer, documents
    )
    assert len(read) == 11  # size unknown: the first ten, and the one that found the budget full


@pytest.mark.parametrize("budget", [1 << 30, "ten documents"])
def test_the_log_line_says_the_bytes_read_not_the_budget(
    budget: int | str, make_cfg: Callable[..., DataConfig], caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 48: a small corpus of unknown size logged "1073741824 bytes the first bytes of (size
    unknown)". The line now gives the bytes read, counted here from the documents themselves."""
    docs = _two_source_docs()
    sizes = [len(d.encode()) for d in docs]
    limit = 10 * sizes[0] if budget == "ten documents" else budget
    plan = resolve(make_cfg(tokenizer="bpe", bpe_vocab_size=300, bpe_train_bytes=limit)).tokenizer
    with caplog.at_level("INFO", logger="gptlab.data.tokenizers.bpe"):
        build_tokenizer(plan, lambda: iter(docs))
    (line,) = [r.getMessage() for r in caplog.records if "BPE training sample" in r.getMessage()]
    if budget == "ten documents":
        assert line == (
            f"BPE training sample: {sum(sizes[:10])} bytes, the first {sum(sizes[:10])} bytes (the "
            f"split's size unknown) of the train documents (data.bpe_train_bytes={limit}; the rest not read)"
        )
    else:
        assert line == (
            f"BPE training sample: all {sum(sizes)} bytes of the train documents "
            f"(data.bpe_train_bytes={1 << 30} not reached)"
        )


def test_a_spread_sample_says_how_much_it_read_of_what() -> None:
    docs = [f"{i:09d}\n" for i in range(1000)]  # 10,000 bytes
    count = SampleCount()
    kept = list(training_sample(docs, 1000, 10_000, count))
    assert (count.kept, count.complete) == (10 * len(kept), False)
    assert count.seen == 10 * (int(kept[-1]) + 1)  # read up to the last document kept
    assert sample_line(count, 1000, 10_000) == (
        f"BPE training sample: {count.kept} bytes, spread over the first {count.seen} bytes of 10000 of "
        "the train documents (data.bpe_train_bytes=1000; the rest not read)"
    )
    count = SampleCount()  # a budget above the split: everything, read to the end
    assert list(training_sample(docs[:50], 1000, 500, count)) == docs[:50]
    assert sample_line(count, 1000, 500) == (
        "BPE training sample: all 500 bytes of the train documents (data.bpe_train_bytes=1000 not reached)"
    )
