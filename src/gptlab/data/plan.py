"""The data config resolved once, at the top of the pipeline, into plain frozen values (made by
`data.resolve`; this module holds only the values, so every stage can name them without a cycle).

`resolve(cfg)` checks the `data` settings (each bad one a one-line error naming it), matches the files,
resolves every path against the launch directory, and computes what identifies the data: the source's
fingerprint, the tokenizer's identity and the packed cache's key. The stages below take only the part
they need — sources a SourcePlan, tokenizing a TokenizerPlan, packing the DataPlan, the shard reader
a ShardsPlan — and never read the config or resolve a path again.

The cache key is sha256 (16 hex digits) of sorted-key JSON of {format, source fingerprint, tokenizer
identity, val_fraction, max_bytes, doc_separator, streaming}; tests/data/test_cache_keys.py recomputes
it by hand, so a cache packed by an earlier version is found again.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gptlab.data.splits import val_period

# bump when the file layout or split rule changes: old caches are then ignored. 2: the byte tokenizer
# ends documents with BYTE_EOS and is stored as uint8; meta.json records sizes and checksums. 3: text is
# encoded as ordinary text (a <|endoftext|> written in a document is not an EOS id), so caches of 2 hold
# wrong ids and are not reused. 4: empty and whitespace-only documents are dropped from every source
# (they were packed as a lone EOS, except in text files split at data.doc_separator)
FORMAT_VERSION = 4


@dataclass(frozen=True)
class SourcePlan:
    """Where the documents come from, resolved: the kind, the matched files, the limits."""

    kind: str  # data.source
    path: str | None  # data.path as the user wrote it: what error lines quote
    files: tuple[Path, ...]  # matched files in order (pystdlib: relative to root; a hub directory's files)
    root: Path | None  # pystdlib: the stdlib's directory; hub: a downloaded dataset directory
    name: str | None
    subset: str | None
    split: str
    text_column: str
    max_bytes: int | None
    doc_separator: str | None
    streaming: bool
    hf_cache: Path  # `datasets`' cache for local files, under data.cache_dir
    fingerprint: str  # what load_documents would return, from metadata only
    size_bound: int | None  # an upper bound on the text bytes, where file sizes give one

    @property
    def streamed(self) -> bool:
        """Whether the streaming packer (bounded memory) packs it instead of datasets.map."""
        return (self.kind == "text" and self.doc_separator is not None) or (
            self.kind == "hub" and self.streaming
        )


@dataclass(frozen=True)
class TokenizerPlan:
    """The tokenizer to build and what makes its ids differ (its identity, part of the cache key)."""

    kind: str  # data.tokenizer
    identity: str
    bpe_vocab_size: int
    bpe_trainer: str
    bpe_train_bytes: int | None
    bpe_encoder: str
    tiktoken_encoding: str  # a tiktoken name, or the resolved path of a .tiktoken file
    pretrained_file: Path | None  # pretrained: the tokenizer.json
    bpe_dir: Path | None  # bpe: where the trained tokenizer is cached


@dataclass(frozen=True)
class DataPlan:
    """What packing needs: the source, the tokenizer, the split rule and the cache entry."""

    source: SourcePlan
    tokenizer: TokenizerPlan
    val_fraction: float
    cache_root: Path
    key: str  # the packed entry's directory name under cache_root
    num_proc: int  # the most processes packing may use (it picks fewer where they do not pay)

    @property
    def entry(self) -> Path:
        """The packed cache entry's directory."""
        return self.cache_root / self.key

    @property
    def val_period(self) -> int:
        """Document i goes to val iff i % val_period == 0."""
        return val_period(self.val_fraction)


@dataclass(frozen=True)
class ShardsPlan:
    """data.source=tokens: the shard files (train without the val ones), their vocabulary settings."""

    path: str  # data.path as written
    train_files: tuple[Path, ...]
    val_files: tuple[Path, ...]
    token_dtype: str | None
    vocab_size: int | None
    tokenizer_path: str | None  # as written (messages)
    tokenizer_file: Path | None  # resolved
    val_fraction: float
    cache_root: Path
