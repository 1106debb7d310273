"""DataConfig: where text comes from, how it is tokenized and batched (the `data` group's schema)."""

from __future__ import annotations

from dataclasses import dataclass

SOURCES = ("pystdlib", "text", "json", "parquet", "hub", "tokens")
TOKENIZERS = ("byte", "bpe", "pretrained", "tiktoken")
TOKEN_DTYPES = ("uint16", "uint32")
BPE_TRAINERS = ("tokenizers", "rustbpe")


@dataclass
class DataConfig:
    """One code path for every source: a `datasets.Dataset` with a text column, then tokenize+pack
    (streamed for data.doc_separator and data.streaming; read in place for data.source=tokens)."""

    source: str = "pystdlib"  # pystdlib | text | json | parquet | hub | tokens
    path: str | None = None  # glob(s) of local files (text/json/parquet/tokens), or a local copy of a hub set
    name: str | None = None  # hub dataset id, e.g. roneneldan/TinyStories
    subset: str | None = None  # hub config name
    split: str = "train"  # which split of the source to read (the val split is carved from it)
    text_column: str = "text"
    max_bytes: int | None = None  # stop reading documents after this many bytes (big hub sets)
    # text: split each file into documents at this string while streaming it (e.g. <|endoftext|>;
    # "\n\n" for a blank line; \n and \t escapes are understood); null: one file, one document
    doc_separator: str | None = None
    streaming: bool = False  # hub: read with datasets' streaming mode, packing as rows arrive
    # tokens: pre-tokenized .bin shards in data.path. llm.c/modded-nanogpt shards (256-int32 header)
    # are recognised by their magic; raw files need token_dtype. val: data.val_path, else held-out shards
    token_dtype: str | None = None  # uint16 | uint32
    val_path: str | None = None  # tokens: the val shard file(s) or glob
    vocab_size: int | None = None  # tokens: ids are < vocab_size (or give data.tokenizer_path)
    tokenizer: str = "byte"  # byte | bpe | pretrained | tiktoken
    # tiktoken: gpt2 | cl100k_base | o200k_base | ... (tiktoken's cache or a download), or the path of
    # a .tiktoken file (<base64 token> <rank> a line; GPT-2's split pattern, <|endoftext|> after the last)
    tiktoken_encoding: str = "gpt2"
    tokenizer_path: str | None = None  # pretrained/tokens: a tokenizer.json file or a directory holding one
    bpe_vocab_size: int = 4096
    # bpe: the trainer. rustbpe (nanochat's; pip install rustbpe) trained 5x faster at the same
    # compression (docs/performance.md, "BPE training"); its ids differ, so it keys its own cache
    bpe_trainer: str = "tokenizers"  # tokenizers | rustbpe
    # bpe: train on at most this many bytes of the train documents, spread evenly over the split
    # (its first bytes when a streamed hub set's size is unknown); null: every train document.
    # Compression on held-out text stops improving long before (docs/performance.md, "BPE training")
    bpe_train_bytes: int | None = 1 << 30
    # bpe/pretrained: encode through tiktoken when its ids are checked identical to tokenizers' on a
    # sample of the corpus (auto; tiktoken: an error if not), or always through tokenizers. The ids,
    # and so the packed cache, are the same either way
    bpe_encoder: str = "auto"  # auto | tiktoken | tokenizers
    val_fraction: float = 0.05  # every round(1/val_fraction)-th document (shard, for tokens) goes to val
    batch_size: int = 16  # per device, per micro-step
    # windows validation scores, spread over the whole val split; 0: all of them; null: 128, or
    # all when the split has fewer (an explicit number larger than the split is refused)
    val_windows: int | None = None
    num_workers: int = 0
    num_proc: int = 2  # processes for tokenizing (datasets.map, or the streaming packer's pool)
    # attention does not cross an end-of-text id inside a window (the eot opens its document); the
    # tokenizer must have one. Positions restart at each eot, or continue 0..T-1 (model/masks.py)
    document_mask: bool = False
    document_positions: str = "restart"  # restart | continue
    cache_dir: str = ".cache/gptlab"  # packed token files and trained tokenizers, keyed by fingerprint
