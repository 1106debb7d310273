"""The default corpus's val split has no near-duplicate in train (issue 12, item 3).

The split under test is the real one: pystdlib documents as load_documents returns them, split by
packing.val_mask as _build splits them, checked against the packed val.bin. Similarity is measured
here, independently of the split's rule: Jaccard similarity of the sets of stripped non-empty lines.
Codec tables generated from one template (encodings/cp850.py vs cp437.py) score 0.65 on it; under
the old every-20th-file split four val files scored 0.57-0.98 against train, under the family split
none scores above 0.26 (Python 3.11). A Jaccard index cannot exceed the ratio of the two set sizes,
so only files of a similar size class (ratio >= THRESHOLD) are compared.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gptlab.data.config import DataConfig
from gptlab.data.packing import prepare_tokens, val_mask
from gptlab.data.resolve import resolve_source
from gptlab.data.sources import load_documents, stdlib_files

THRESHOLD = 0.5
MIN_LINES = 5  # a 1-line `__init__.py` ("# a package") matching another is not leakage


def lines(text: str) -> frozenset[str]:
    return frozenset(s for line in text.splitlines() if (s := line.strip()))


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 0.0


@pytest.fixture(scope="module")
def split(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    """The default corpus's documents by side, as packing writes them (checked against val.bin)."""
    cfg = DataConfig(cache_dir=str(tmp_path_factory.mktemp("split-cache")), num_proc=1)
    docs = load_documents(resolve_source(cfg))
    is_val = val_mask(len(docs), cfg.val_fraction, docs["group"])
    texts = docs["text"]
    sides = {
        "val": [t for t, v in zip(texts, is_val, strict=True) if v],
        "train": [t for t, v in zip(texts, is_val, strict=True) if not v],
    }
    packed = prepare_tokens(cfg)  # byte tokens: val.bin is the val documents' bytes, in order
    val_bytes = b"".join(t.encode("utf-8") + b"\xff" for t in sides["val"])  # BYTE_EOS after each
    assert (
        np.asarray(packed.tokens("val")).tobytes()
        == np.frombuffer(val_bytes, np.uint8).astype(packed.dtype).tobytes()
    )
    return sides


def test_no_val_file_has_a_near_duplicate_in_train(split: dict[str, list[str]]) -> None:
    train = [s for t in split["train"] if len(s := lines(t)) >= MIN_LINES]
    leaks = []
    for text in split["val"]:
        v = lines(text)
        if len(v) < MIN_LINES:
            continue
        for t in train:
            if min(len(v), len(t)) >= THRESHOLD * max(len(v), len(t)) and jaccard(v, t) >= THRESHOLD:
                leaks.append((text.splitlines()[:2], jaccard(v, t)))
    assert not leaks, leaks


def test_the_measure_flags_the_codec_tables(split: dict[str, list[str]]) -> None:
    """The check above can tell: two of the stdlib's generated codec tables score above it."""
    root, _ = stdlib_files()
    cp850, cp437 = (lines((root / "encodings" / f).read_text()) for f in ("cp850.py", "cp437.py"))
    assert jaccard(cp850, cp437) >= THRESHOLD
    assert len(split["val"]) >= 10 and sum(map(len, split["val"])) > 200_000  # a real val split


def test_a_group_never_straddles_the_split() -> None:
    groups = ["b", "b", "a", "c", "a", "d", "c", "e"]
    mask = val_mask(len(groups), 0.5, groups)  # groups by first appearance: b0 a1 c2 d3 e4
    assert mask.tolist() == [True, True, False, True, False, False, True, True]
    assert val_mask(3, 0.5, ["x", "x", "x"]).tolist() == [True, False, True]  # one group: by docs
    assert val_mask(5, 0.5).tolist() == [True, False, True, False, True]


def test_the_cache_key_names_the_split_rule(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Caches packed under another split rule are not reused: the rule is in the fingerprint."""
    from gptlab.data.resolve import resolve
    from gptlab.data.sources import stdlib as sources

    cfg = DataConfig(cache_dir=str(tmp_path))
    now = resolve(cfg).key
    monkeypatch.setattr(sources, "STDLIB_SPLIT", "every-20th-file")
    assert resolve(cfg).key != now
