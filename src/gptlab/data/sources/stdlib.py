"""data.source=pystdlib: the Python standard library's own `.py` files, split by near-duplicate family."""

from __future__ import annotations

import logging
import os
import re
import sysconfig
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from gptlab.data.sources.blank import is_blank
from gptlab.data.sources.limits import take_bytes

if TYPE_CHECKING:
    import datasets

log = logging.getLogger(__name__)

# Parts of the stdlib that are not representative library code (tests, GUI, vendored wheels).
STDLIB_EXCLUDED_DIRS = frozenset(
    {"site-packages", "test", "tests", "idlelib", "tkinter", "lib2to3", "ensurepip", "__pycache__"}
)
# Names the stdlib's train/val rule (split by stdlib_family): change it when the rule changes, so
# token caches packed under the old rule (every 20th file, families straddling) are not reused.
STDLIB_SPLIT = "family-v1"


def stdlib_files() -> tuple[Path, list[Path]]:
    """The stdlib root and its `.py` files (sorted relative paths), excluded dirs pruned."""
    root = Path(sysconfig.get_paths()["stdlib"])
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in STDLIB_EXCLUDED_DIRS]
        rel_dir = Path(dirpath).relative_to(root)
        found.extend(rel_dir / f for f in filenames if f.endswith(".py"))
    return root, sorted(found, key=lambda p: p.as_posix())


def stdlib_family(rel: Path) -> str:
    """The near-duplicate family of a stdlib file, the unit the train/val split keeps on one side.

    A package is one family (`encodings/cp850.py` and `encodings/cp437.py`, generated codec tables
    ~96% alike, are both "encodings"); a top-level module joins the modules that share its leading
    word, underscores and digits ignored (`sre_compile`, `sre_parse` and `sre_constants`, three
    near-identical shims, are "sre"; `_collections_abc` goes with `collections`).
    """
    head = rel.parts[0].removesuffix(".py").lstrip("_")
    word = re.match(r"[A-Za-z]*", head)
    return (word.group(0) if word and word.group(0) else head).lower()


def _stdlib_texts(root: Path, files: Iterable[Path]) -> Iterator[str]:
    for rel in files:
        raw = (root / rel).read_bytes()
        try:
            yield raw.decode("utf-8")
        except UnicodeDecodeError:
            log.warning("stdlib file %s is not UTF-8; undecodable bytes replaced", rel)
            yield raw.decode("utf-8", errors="replace")


def stdlib_documents(root: Path, files: list[Path], max_bytes: int | None) -> datasets.Dataset:
    """The stdlib files in path order, each with its family in a "group" column (packing splits
    train/val by group, so near-duplicate files never straddle the split); empty files (three
    `__init__.py` on 3.11) are dropped, as blank documents are from every source (sources.blank)."""
    import datasets  # here: data.resolve reads stdlib_files on every run, cached tokens or not

    read: list[Path] = []  # the non-blank files, in the order their texts were yielded

    def nonblank() -> Iterator[str]:
        for rel, text in zip(files, _stdlib_texts(root, files), strict=True):
            if not is_blank(text):
                read.append(rel)
                yield text

    texts: Iterable[str] = nonblank()
    if max_bytes is not None:
        texts = take_bytes(texts, max_bytes)
    kept = list(texts)  # a prefix of the non-blank files: max_bytes stops early
    groups = [stdlib_family(f) for f in read[: len(kept)]]
    return datasets.Dataset.from_dict({"text": kept, "group": groups})
