"""Issue 37 §2: empty and whitespace-only documents are dropped from every source, before data.max_bytes
counts, so none packs as a lone end-of-text id (they were kept everywhere but in separator-split files).

The oracle is the byte tokenizer's packed bytes written out by hand: the kept documents in order, 0xFF
after each, document i in val iff i % 2 == 0 (val_fraction 0.5).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gptlab.data.packing import prepare_tokens
from gptlab.data.sources.stdlib import stdlib_documents

# blank: "", three spaces, None, "\n\t", the ASCII form feed and vertical tab; "\u3000" (an ideographic
# space) is not ASCII whitespace and is kept as text
ROWS = ["one", "", "   ", None, "two\n", "\n\t", "three", "\x0c\x0b ", "  four", "\u3000"]
KEPT = ["one", "two\n", "three", "  four", "\u3000"]


def packed(kept: list[str]) -> dict[str, bytes]:
    """What the byte tokenizer packs for these documents: val the even ones, train the odd."""
    return {
        "val": b"".join(d.encode() + b"\xff" for d in kept[0::2]),
        "train": b"".join(d.encode() + b"\xff" for d in kept[1::2]),
    }


def split_bytes(p) -> dict[str, bytes]:
    return {s: np.asarray(p.tokens(s)).astype(np.uint8).tobytes() for s in ("train", "val")}


def write_rows(d: Path, fmt: str) -> Path:
    if fmt == "parquet":
        pq.write_table(pa.table({"story": ROWS}), d / "rows.parquet", row_group_size=3)
        return d / "rows.parquet"
    (d / "rows.jsonl").write_text("".join(json.dumps({"story": r}) + "\n" for r in ROWS))
    return d / "rows.jsonl"


@pytest.mark.parametrize("fmt", ["json", "parquet"])
@pytest.mark.parametrize("source", ["files", "hub", "hub-streamed"])
def test_blank_rows_are_dropped(make_cfg, tmp_path: Path, fmt: str, source: str) -> None:
    path = write_rows(tmp_path, fmt)
    if source == "files":
        cfg = make_cfg(source=fmt, path=str(path), text_column="story", val_fraction=0.5)
    else:
        cfg = make_cfg(source="hub", name="local/set", path=str(path), text_column="story",
                       val_fraction=0.5, streaming=source == "hub-streamed")  # fmt: skip
    p = prepare_tokens(cfg)
    assert split_bytes(p) == packed(KEPT)
    assert p.meta["n_docs"] == {"train": 2, "val": 3}


@pytest.mark.parametrize("streaming", [False, True])
def test_blank_rows_count_no_bytes_and_a_blank_cut_is_dropped(make_cfg, tmp_path: Path, streaming) -> None:
    """max_bytes=13: "one" (3), "two\\n" (4), "three" (5) leave 1 byte, which cuts "  four" to " ": blank,
    dropped. Had the blank rows counted (3 + 2 + 3 bytes before it), "three" would have been cut to "t"."""
    path = write_rows(tmp_path, "json")
    cfg = make_cfg(source="hub", name="local/set", path=str(path), text_column="story", val_fraction=0.5,
                   max_bytes=13, streaming=streaming)  # fmt: skip
    assert split_bytes(prepare_tokens(cfg)) == packed(["one", "two\n", "three"])


def test_blank_whole_files_are_dropped(make_cfg, tmp_path: Path) -> None:
    """data.source=text without a separator: one document a file (the non-streamed packer)."""
    d = tmp_path / "corpus"
    d.mkdir()
    texts = ["alpha\n", "", " \n\t\n", "beta", "\r\n", "gamma  "]
    for i, t in enumerate(texts):
        (d / f"f{i}.txt").write_bytes(t.encode())
    p = prepare_tokens(make_cfg(source="text", path=str(d / "*.txt"), val_fraction=0.5))
    assert split_bytes(p) == packed(["alpha\n", "beta", "gamma  "])
    assert p.meta["n_docs"] == {"train": 1, "val": 2}


def test_blank_separated_documents_are_dropped(make_cfg, tmp_path: Path) -> None:
    """data.doc_separator (the streaming packer), the rule the other sources now follow."""
    f = tmp_path / "c.txt"
    f.write_text("one<s><s>   <s>two\n<s>\n\t<s>three<s>\x0c<s>  four<s>\u3000<s>")
    p = prepare_tokens(make_cfg(source="text", path=str(f), doc_separator="<s>", val_fraction=0.5))
    assert split_bytes(p) == packed(KEPT)


def test_empty_stdlib_files_are_dropped_with_their_groups_aligned(tmp_path: Path) -> None:
    """pystdlib: an empty `__init__.py` is dropped and every kept file keeps its own family."""
    files = {"abc.py": "x = 1\n", "pkg/__init__.py": "", "pkg/mod.py": "y = 2\n", "tail.py": "  \n"}
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    ds = stdlib_documents(tmp_path, [Path(r) for r in files], None)
    assert ds["text"] == ["x = 1\n", "y = 2\n"] and ds["group"] == ["abc", "pkg"]
    ds = stdlib_documents(tmp_path, [Path(r) for r in files], 8)  # 6 bytes, then "y = 2\n" cut to "y "
    assert ds["text"] == ["x = 1\n", "y "] and ds["group"] == ["abc", "pkg"]


@pytest.mark.parametrize("streaming", [False, True])
def test_a_source_of_blank_documents_only_is_refused_as_no_text(make_cfg, tmp_path: Path, streaming) -> None:
    """Loaded or streamed, the same line as for an empty text file (docs/bad-inputs.md, "empty file")."""
    path = tmp_path / "blank.jsonl"
    path.write_text("".join(json.dumps({"story": r}) + "\n" for r in ["", "  \n", None]))
    cfg = make_cfg(source="hub", name="local/set", path=str(path), text_column="story", streaming=streaming)
    with pytest.raises(ValueError) as err:
        prepare_tokens(cfg)
    assert str(err.value) == (
        f"data.source=hub: the documents hold no text (0 tokens; path={path}); accepted: non-empty UTF-8 text"
    )
