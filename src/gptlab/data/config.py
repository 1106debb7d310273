"""DataConfig: where text comes from, how it is tokenized and batched (the `data` group's schema)."""

from __future__ import annotations

from dataclasses import dataclass

SOURCES = ("pystdlib", "text", "json", "parquet", "hub")
TOKENIZERS = ("byte", "bpe", "pretrained")


@dataclass
class DataConfig:
    """One code path for every source: a `datasets.Dataset` with a text column, then tokenize+pack."""

    source: str = "pystdlib"  # pystdlib | text | json | parquet | hub
    path: str | None = None  # glob(s) of local files (text/json/parquet), or a local copy of a hub set
    name: str | None = None  # hub dataset id, e.g. roneneldan/TinyStories
    subset: str | None = None  # hub config name
    split: str = "train"  # which split of the source to read (the val split is carved from it)
    text_column: str = "text"
    max_bytes: int | None = None  # stop reading documents after this many bytes (big hub sets)
    tokenizer: str = "byte"  # byte | bpe | pretrained
    tokenizer_path: str | None = None  # pretrained: a tokenizer.json file or a directory holding one
    bpe_vocab_size: int = 4096
    val_fraction: float = 0.05  # every round(1/val_fraction)-th document goes to validation
    batch_size: int = 16  # per device, per micro-step
    # windows validation scores, spread over the whole val split; 0: all of them; null: 128, or
    # all when the split has fewer (an explicit number larger than the split is refused)
    val_windows: int | None = None
    num_workers: int = 0
    num_proc: int = 2  # processes for datasets.map tokenization
    cache_dir: str = ".cache/gptlab"  # packed token files and trained tokenizers, keyed by fingerprint
