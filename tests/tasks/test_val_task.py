"""The built-in task val_continuation, checked against the source files it was built from.

The corpus is text files of random words written here, one document each; with
data.val_fraction=0.25 every 4th file (sorted) is a val document (docs/data.md). The oracle finds
each item's strings in those files with `str.count`: it shares no code with the builder (no token
ids, no end-of-text search, no draws).
"""

from __future__ import annotations

import itertools
import json
import logging
import random
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from gptlab.data.config import DataConfig
from gptlab.data.datamodule import TokenDataModule
from gptlab.data.tokenizers import BYTE_EOS, ByteTokenizer
from gptlab.evaluation.run import load_task
from gptlab.evaluation.val_task import DEFAULT, ValContinuation, build_items
from tests.interop.helpers import load_cli
from tests.tasks.test_evaluate_tasks import printed  # evaluate.py's table, read in-process

EVALUATE = load_cli("evaluate.py")
N_FILES = 24  # every 4th is val: 6 val documents of ~1,700 bytes


def write_corpus(directory: Path, seed: int, n_files: int = N_FILES) -> dict[str, str]:
    """Files of random lowercase words, 8 to a line: any 16 bytes of one occur in no other."""
    rng = random.Random(seed)
    directory.mkdir(parents=True)
    texts = {}
    for f in range(n_files):
        words = ["".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=rng.randint(2, 9))) for _ in range(260)]
        text = "\n".join(" ".join(words[i : i + 8]) for i in range(0, len(words), 8)) + "\n"
        (directory / f"doc{f:02d}.txt").write_text(text)
        texts[f"doc{f:02d}.txt"] = text
    return texts


def datamodule(corpus: Path, cache: Path) -> TokenDataModule:
    cfg = DataConfig(source="text", path=str(corpus / "*.txt"), val_fraction=0.25, cache_dir=str(cache))
    return TokenDataModule(cfg, block_size=64, seed=0)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("valtask")
    texts = write_corpus(root / "corpus", seed=1)
    dm = datamodule(root / "corpus", root / "cache")
    return {"root": root, "texts": texts, "dm": dm, "items": load_task("val_continuation", dm)}


def files_with(texts: dict[str, str], s: str) -> list[str]:
    """The files holding s, once per occurrence."""
    return [name for name, text in texts.items() for _ in range(text.count(s))]


def test_every_item_against_the_source_files(built: dict) -> None:
    texts, items = built["texts"], built["items"]
    val_files = {f"doc{f:02d}.txt" for f in range(0, N_FILES, 4)}
    assert len(items) == DEFAULT.items == 300
    used = set()
    for item in items:
        assert len(item.choices) == 4 and item.delimiter == ""
        assert len(item.context.encode()) == 64 and not item.context[-1].isspace()
        assert [len(c.encode()) for c in item.choices] == [16] * 4
        assert all(c[0].isspace() and c.strip() for c in item.choices)
        assert len(set(item.choices)) == 4
        # the right choice is the text that follows the context in its document ...
        [home] = files_with(texts, item.context + item.choices[item.label])
        # ... and each choice comes from its own document, the right one from the context's
        homes = [files_with(texts, c) for c in item.choices]
        assert all(len(h) == 1 for h in homes), homes
        assert len({h[0] for h in homes}) == 4 and homes[item.label] == [home]
        used |= {h[0] for h in homes}
    assert used <= val_files and len(used) >= 4


def test_with_a_bpe_every_choice_is_16_tokens_after_its_context(built: dict) -> None:
    """A BPE trained on the corpus: the tokenizer itself (not the builder) encodes each context and
    context + choice; every choice adds exactly 16 tokens and leaves the context's 64 as they were."""
    cfg = DataConfig(
        source="text", path=str(built["root"] / "corpus" / "*.txt"), val_fraction=0.25,
        tokenizer="bpe", bpe_vocab_size=400, cache_dir=str(built["root"] / "cache"),
    )  # fmt: skip
    dm = TokenDataModule(cfg, block_size=64, seed=0)
    items = load_task("val_continuation", dm)
    tokenizer = dm.prepare().tokenizer
    assert len(items) == 300 and tokenizer.name.startswith("bpe")
    for item in items:
        context = list(tokenizer.encode(item.context))
        assert len(context) == 64
        for choice in item.choices:
            whole = list(tokenizer.encode(item.context + choice))
            assert whole[:64] == context and len(whole) == 80
        [home] = files_with(built["texts"], item.context + item.choices[item.label])
        assert len({files_with(built["texts"], c)[0] for c in item.choices}) == 4


def test_labels_spread_over_the_positions(built: dict) -> None:
    counts = Counter(item.label for item in built["items"])
    # 300 draws of 1 in 4: 75 each, standard deviation 7.5; 45..105 is 4 of them
    assert sorted(counts) == [0, 1, 2, 3] and all(45 <= n <= 105 for n in counts.values()), counts


def test_rebuilt_from_the_cache_and_fresh_the_same(built: dict, caplog) -> None:
    dm, items = built["dm"], built["items"]
    [cached] = [
        f
        for f in (built["root"] / "cache" / "tasks").glob("val_continuation-*.json")
        if json.loads(f.read_text())["items"][0]["context"] == items[0].context
    ]
    assert load_task("val_continuation", dm) == items  # from the file
    packed = dm.prepare()
    assert build_items(packed.tokens("val"), packed.tokenizer) == items  # fresh, no cache
    fresh_dm = datamodule(built["root"] / "corpus", built["root"] / "cache")
    assert load_task("val_continuation", fresh_dm) == items  # another data module, same split
    # a damaged file (a changed choice that still parses) is said and rebuilt, never read
    record = json.loads(cached.read_text())
    record["items"][0]["choices"][0] = " zzzzzzzzzzzzzzz"
    cached.write_text(json.dumps(record))
    with caplog.at_level(logging.WARNING):
        assert load_task("val_continuation", dm) == items
    assert "(its items do not match their checksum): building them again" in caplog.text
    cached.write_text(cached.read_text()[:100])  # truncated: not JSON
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        assert load_task("val_continuation", dm) == items
    assert "is unreadable (JSONDecodeError)" in caplog.text
    assert json.loads(cached.read_text())["items"][0]["choices"] == list(items[0].choices)


def test_other_val_data_other_items(built: dict) -> None:
    """Another corpus, the same cache directory and tokenizer: its own items, from its own files."""
    texts = write_corpus(built["root"] / "other", seed=2)
    items = load_task("val_continuation", datamodule(built["root"] / "other", built["root"] / "cache"))
    assert len(items) == 300
    assert not {i.context for i in items} & {i.context for i in built["items"]}
    for item in items[:50]:
        assert len(files_with(texts, item.context + item.choices[item.label])) == 1


def test_items_are_not_drawn_from_the_run_seed(built: dict) -> None:
    """The data module's seed (the run's) changes nothing: every job of a sweep scores the same items."""
    cfg = built["dm"].cfg
    assert load_task("val_continuation", TokenDataModule(cfg, block_size=32, seed=1234)) == built["items"]


def split_of(docs: list[str]) -> np.ndarray:
    """Val tokens as the packer writes them for the byte tokenizer: each document then BYTE_EOS."""
    return np.frombuffer(b"".join(d.encode() + bytes([BYTE_EOS]) for d in docs), dtype=np.uint8)


def test_fewer_documents_than_choices_passages_apart(caplog) -> None:
    """3 documents, 4 choices: the passages come from any document, never overlapping. Each choice
    is found in the documents with str.find (16 random letters occur once), its context right before
    the right one, and two passages of one document at least 64 + 16 bytes apart."""
    rng = random.Random(3)
    letters = "abcdefghijklmnopqrstuvwxyz"
    docs = [" ".join("".join(rng.choices(letters, k=rng.randint(2, 9))) for _ in range(60)) for _ in range(3)]
    params = ValContinuation(items=20)
    with caplog.at_level(logging.WARNING):
        items = build_items(split_of(docs), ByteTokenizer(), params)
    assert "3 usable document(s), fewer than 4 choices" in caplog.text and "(chance 1/4)" in caplog.text
    assert len(items) == 20 and all(len(i.choices) == 4 for i in items)
    same_document = 0
    for item in items:
        where = []
        for c in item.choices:
            [(d, at)] = [(d, doc.find(c)) for d, doc in enumerate(docs) if c in doc]
            assert docs[d].count(c) == 1
            where.append((d, at))
        d, at = where[item.label]
        assert docs[d][at - 64 : at] == item.context
        for (d1, a1), (d2, a2) in itertools.combinations(where, 2):
            assert d1 != d2 or abs(a1 - a2) >= 80, (where, item)
            same_document += d1 == d2
    assert same_document > 0  # the fallback really draws from one document twice


@pytest.mark.parametrize(
    ("docs", "want"),
    [
        (["short text"], "the val split has 1 document(s), none usable, 11 tokens"),
        (["wordwordword" * 10, "nospaces" * 20], "the val split has 2 document(s), none usable, 282 tokens"),
    ],
    ids=["too short", "no word boundary"],
)
def test_a_split_too_small_is_one_line(docs: list[str], want: str) -> None:
    with pytest.raises(ValueError) as err:
        build_items(split_of(docs), ByteTokenizer())
    assert str(err.value) == (
        "task=val_continuation needs a val document of 80 tokens or more with a word boundary; "
        f"{want}; accepted: a larger val split (data.max_bytes, data.val_fraction)"
    )


def test_evaluate_py_scores_the_task_as_its_items_in_a_file(built: dict, byte_ckpt: Path, capsys) -> None:
    """evaluate.py composes the data config as train.py does, so data=text with the corpus selects
    the val split the test's data module built from; the same items written as a plain jsonl file
    score the same to the last printed digit, and the table says 300 items at chance 1/4."""
    root, items = built["root"], built["items"]
    as_file = root / "same_items.jsonl"
    as_file.write_text(
        "".join(
            json.dumps({"context": i.context, "choices": list(i.choices), "answer": i.label}) + "\n"
            for i in items
        )
    )
    rows = printed(
        capsys,
        f"ckpt_path={byte_ckpt}",
        f"task=val_continuation,{as_file}",
        "batch_size=64",
        "data=text",
        f"data.path={root}/corpus/*.txt",
        "data.val_fraction=0.25",
        f"data.cache_dir={root}/cache",
    )
    task, same = rows["val_continuation"], rows[str(as_file)]
    assert task["items"] == "300" and task["chance"] == "0.2500" and task["cut"] == "300"  # 80 > 64 + 1
    assert {k: task[k] for k in ("acc", "acc_norm", "bpb")} == {
        k: same[k] for k in ("acc", "acc_norm", "bpb")
    }


NO_EOS = (
    r"error: task=val_continuation finds the val documents at end-of-text ids, but the tokenizer "
    r"'ids256' has none; accepted: data.tokenizer=byte\|bpe\|tiktoken, or a data.tokenizer_path with "
    r"an end-of-text token"
)


@pytest.mark.parametrize(
    ("data", "want"),
    [
        (["data=tokens", "data.path={d}/ids.bin", "data.token_dtype=uint16", "data.vocab_size=256"], NO_EOS),
    ],
    ids=["no end-of-text id"],
)
def test_evaluate_py_refuses_what_it_cannot_build(
    data: list[str], want: str, tmp_path: Path, byte_ckpt: Path, capsys, monkeypatch
) -> None:
    np.random.default_rng(0).integers(0, 256, 20_000).astype(np.uint16).tofile(tmp_path / "ids.bin")
    monkeypatch.chdir(tmp_path)
    args = [f"ckpt_path={byte_ckpt}", "task=val_continuation", f"data.cache_dir={tmp_path}/cache"]
    with pytest.raises(SystemExit) as exit_:
        EVALUATE.main(args + [a.replace("{d}", str(tmp_path)) for a in data])
    assert exit_.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    errors = [line for line in captured.err.splitlines() if line.startswith("error")]
    assert errors == [captured.err.strip().splitlines()[-1]]  # before it: datasets' progress bars
    assert re.fullmatch(want, errors[0]), errors
    assert not (tmp_path / "cache" / "tasks").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) in (["cache", "ids.bin"], ["ids.bin"])


def test_a_split_of_repeated_text_is_one_line() -> None:
    """Two documents of one repeated word: every draw has equal choices, so no item can be made."""
    with pytest.raises(ValueError) as err:
        build_items(split_of(["word " * 100, "word " * 90]), ByteTokenizer(), ValContinuation(attempts=20))
    assert str(err.value) == (
        "task=val_continuation: no usable item 1 in 20 draws from the val split (2 usable documents, 952 "
        "tokens): each had two equal choices, a whitespace-only one, one whose text does not re-encode to "
        "its tokens or (fewer usable documents than choices) overlapping passages; accepted: a val split "
        "of varied text that the tokenizer round-trips"
    )


def test_at_a_short_block_the_task_is_its_items_with_the_contexts_last_tokens_as_it_says(
    built: dict, byte_ckpt: Path, caplog
) -> None:
    """Issue 48: a block_size=64 model cuts every item's context. What the task then measures is said
    (info, not a warning) and is true: scoring the items equals scoring them with only the context's
    last N tokens (bytes here), N as said, and those items fit the block uncut. The items are the
    same at every block size, as the str.count oracle above checks at 64 bytes of context."""
    import torch

    from gptlab.checkpoints import load_model
    from gptlab.evaluation.formats import Item
    from gptlab.evaluation.run import cut_note
    from gptlab.evaluation.scoring import choice_loglikelihoods

    model, tokenizer = load_model(str(byte_ckpt), "cpu")
    block = int(model.cfg.block_size)
    assert block == 64
    items = built["items"][:40]
    level, note = cut_note("val_continuation", 40, 40, block)
    [said] = re.findall(r"follows the last (\d+) of each item's 64 context tokens", note)
    n = int(said)
    assert level == logging.INFO and note.startswith("val_continuation at block_size=64: which of 4 ")
    full = choice_loglikelihoods(model, tokenizer, items, 16, torch.device("cpu"))
    short = [Item(i.context[-n:], i.choices, i.label, i.delimiter) for i in items]
    seen = choice_loglikelihoods(model, tokenizer, short, 16, torch.device("cpu"))
    assert full.cut == 40 and seen.cut == 0  # the short items fit the block as they are
    flat = [ll for lls in full.loglikelihoods for ll in lls]
    assert [ll for lls in seen.loglikelihoods for ll in lls] == pytest.approx(flat, abs=1e-5)
