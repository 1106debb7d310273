"""Cache keys recomputed by hand: a packed-token cache (and a trained BPE) made before the data room was
reorganised is found again under the same directory name, so nobody repacks after upgrading.

The oracle is the key's definition written out here from what it includes (the format version, the
source's identity, the tokenizer's identity, the split settings), hashed as the cache has always
hashed it: the first 16 hex digits of sha256 over sorted-key JSON. It shares no code with gptlab.
The test first passed against the code before the reorganisation (commit 75d6bbb).
"""

from __future__ import annotations

import hashlib
import json
import logging
import sys
import sysconfig
from collections.abc import Callable
from pathlib import Path

from gptlab.data.config import DataConfig
from gptlab.data.packing import prepare_tokens

FORMAT_VERSION = 4  # the packed layout's version (bumped only when the files change meaning)


def short_hash(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:16]


def files_identity(files: list[Path]) -> list[list[object]]:
    return sorted([str(f), f.stat().st_size, f.stat().st_mtime_ns] for f in files)


def source_key(source: str, files: list[Path], max_bytes: int | None = None) -> str:
    return short_hash(
        {"source": source, "max_bytes": max_bytes, "text_column": "text", "files": files_identity(files)}
    )


def packed_key(source_fp: str, tokenizer: str, val_fraction: float = 0.05, **split: object) -> str:
    parts = {
        "format": FORMAT_VERSION,
        "source": source_fp,
        "tokenizer": tokenizer,
        "val_fraction": val_fraction,
        "max_bytes": split.get("max_bytes"),
        "doc_separator": split.get("doc_separator"),
        "streaming": split.get("streaming", False),
    }
    return short_hash(parts)


def test_byte_text_cache_key_and_reuse(text_cfg: Callable[..., DataConfig], corpus_dir: Path, caplog) -> None:
    cfg = text_cfg()
    files = sorted(corpus_dir.glob("*.txt"))
    key = packed_key(source_key("text", files), "byte")
    packed = prepare_tokens(cfg)
    assert packed.directory == Path(cfg.cache_dir) / key
    assert packed.meta["fingerprint"] == key
    with caplog.at_level(logging.INFO, logger="gptlab.data"):
        again = prepare_tokens(text_cfg())
    assert again.directory == packed.directory
    assert "using cached tokens at" in caplog.text


def test_streamed_max_bytes_key(make_cfg: Callable[..., DataConfig], tmp_path: Path) -> None:
    corpus = tmp_path / "stories.txt"
    corpus.write_text("".join(f"story {i} about a cat.\n<|endoftext|>\n" for i in range(300)))
    cfg = make_cfg(
        source="text", path=str(corpus), doc_separator="<|endoftext|>", max_bytes=5000, val_fraction=0.1
    )
    key = packed_key(
        source_key("text", [corpus], max_bytes=5000),
        "byte",
        0.1,
        max_bytes=5000,
        doc_separator="<|endoftext|>",
        streaming=True,
    )
    assert prepare_tokens(cfg).directory == Path(cfg.cache_dir) / key


def test_bpe_cache_keys(text_cfg: Callable[..., DataConfig], corpus_dir: Path) -> None:
    """The packed key holds the BPE's identity (its size, the source it trains on, the split); the trained
    tokenizer is cached apart under the sha256 of that identity."""
    cfg = text_cfg(tokenizer="bpe", bpe_vocab_size=300, bpe_trainer="tokenizers")
    source_fp = source_key("text", sorted(corpus_dir.glob("*.txt")))
    identity = f"bpe300:{source_fp}:0.05"  # corpus far below data.bpe_train_bytes: no sample tag
    packed = prepare_tokens(cfg)
    assert packed.directory.name == packed_key(source_fp, identity)
    bpe_dir = (
        Path(cfg.cache_dir) / "tokenizers" / f"bpe300-{hashlib.sha256(identity.encode()).hexdigest()[:16]}"
    )
    assert (bpe_dir / "tokenizer.json").is_file()


def test_bpe_sample_tag_in_key(text_cfg: Callable[..., DataConfig], corpus_dir: Path) -> None:
    cfg = text_cfg(tokenizer="bpe", bpe_vocab_size=300, bpe_train_bytes=1000)
    source_fp = source_key("text", sorted(corpus_dir.glob("*.txt")))
    assert prepare_tokens(cfg).directory.name == packed_key(source_fp, f"bpe300:{source_fp}:0.05:sample1000")


def test_pretrained_key_is_the_file_digest(
    text_cfg: Callable[..., DataConfig], corpus_dir: Path, tmp_path: Path
) -> None:
    from gptlab.data.tokenizers import ByteTokenizer

    file = ByteTokenizer().save(tmp_path / "tok")
    cfg = text_cfg(tokenizer="pretrained", tokenizer_path=str(tmp_path / "tok"))
    digest = hashlib.sha256(file.read_bytes()).hexdigest()[:16]
    key = packed_key(source_key("text", sorted(corpus_dir.glob("*.txt"))), f"pretrained:{digest}")
    assert prepare_tokens(cfg).directory.name == key


def test_pystdlib_key(make_cfg: Callable[..., DataConfig]) -> None:
    root = Path(sysconfig.get_paths()["stdlib"])
    excluded = {"site-packages", "test", "tests", "idlelib", "tkinter", "lib2to3", "ensurepip", "__pycache__"}
    rel = sorted(
        (
            p.relative_to(root)
            for p in root.rglob("*.py")
            if not excluded & set(p.relative_to(root).parts[:-1])
        ),
        key=lambda p: p.as_posix(),
    )
    source_fp = short_hash(
        {
            "source": "pystdlib",
            "max_bytes": 30000,
            "text_column": "text",
            "python": sys.version,
            "files": [[p.as_posix(), (root / p).stat().st_size] for p in rel],
            "split": "family-v1",
        }
    )
    cfg = make_cfg(max_bytes=30000)
    assert prepare_tokens(cfg).directory.name == packed_key(source_fp, "byte", max_bytes=30000)
