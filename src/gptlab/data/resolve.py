"""The one place the `data` config is read: checked, its paths resolved, its files matched, and the
identities computed (source fingerprint, tokenizer identity, cache key) into the values of data.plan."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

from gptlab.data.config import BPE_TRAINERS, SOURCES, TOKENIZERS, DataConfig
from gptlab.data.paths import file_stats, resolve_files, resolve_path, stable_hash
from gptlab.data.plan import FORMAT_VERSION, DataPlan, ShardsPlan, SourcePlan, TokenizerPlan
from gptlab.data.sources import stdlib
from gptlab.data.splits import val_period
from gptlab.data.tokenizers.hf import pretrained_file
from gptlab.data.tokenizers.tiktoken_bpe import BPE_ENCODERS
from gptlab.data.tokenizers.tiktoken_encodings import identity as tiktoken_identity
from gptlab.data.tokenizers.tiktoken_encodings import known_encodings

# ---------------------------------------------------------------- checks


def check_source(cfg: DataConfig) -> None:
    """The source settings that cannot work together, refused in one line each."""
    if cfg.source not in SOURCES:
        raise ValueError(f"data.source={cfg.source!r} is not accepted; choose one of {SOURCES}")
    if cfg.max_bytes is not None and cfg.max_bytes <= 0:
        raise ValueError(f"data.max_bytes={cfg.max_bytes!r} must be a positive integer or null")
    if cfg.source in ("text", "json", "parquet") and not cfg.path:
        raise ValueError(f"data.path is required for data.source={cfg.source} (a file, dir or glob)")
    if cfg.doc_separator is not None and cfg.source != "text":
        raise ValueError(
            f"data.doc_separator applies to data.source=text, not {cfg.source}; "
            "accepted: null, or data.source=text"
        )
    if cfg.streaming and cfg.source != "hub":
        raise ValueError(
            f"data.streaming=true applies to data.source=hub, not {cfg.source}; a text file streams "
            "with data.doc_separator"
        )
    if cfg.source == "hub" and not (cfg.name or cfg.path):
        raise ValueError("data.name is required for data.source=hub (e.g. roneneldan/TinyStories)")


def check_tokenizer_settings(cfg: DataConfig) -> None:
    """The data.tokenizer settings train.py refuses before building anything (one line each)."""
    if cfg.tokenizer not in TOKENIZERS:
        raise ValueError(
            f"data.tokenizer={cfg.tokenizer!r} is not accepted; choose one of {', '.join(TOKENIZERS)}"
        )
    if cfg.bpe_encoder not in BPE_ENCODERS:
        raise ValueError(
            f"data.bpe_encoder={cfg.bpe_encoder!r} is not accepted; choose one of {', '.join(BPE_ENCODERS)}"
        )
    budget = cfg.bpe_train_bytes
    if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int) or budget <= 0):
        raise ValueError(
            f"data.bpe_train_bytes={budget!r} is not accepted; give a number of bytes > 0, "
            "or null to train on every train document"
        )
    if cfg.tokenizer == "bpe" and cfg.bpe_trainer not in BPE_TRAINERS:
        raise ValueError(
            f"data.bpe_trainer={cfg.bpe_trainer!r} is not accepted; choose one of {', '.join(BPE_TRAINERS)}"
        )
    if cfg.tokenizer == "bpe" and not 257 <= cfg.bpe_vocab_size <= 2**32 - 1:
        raise ValueError(
            f"data.bpe_vocab_size={cfg.bpe_vocab_size!r} must be in 257..4294967295 "
            "(256 byte ids + <|endoftext|> at least)"
        )


# ---------------------------------------------------------------- source


def resolve_source(cfg: DataConfig) -> SourcePlan:
    """The checked source settings with their files matched, fingerprinted and size-bounded."""
    check_source(cfg)
    parts: dict[str, object] = {
        "source": cfg.source,
        "max_bytes": cfg.max_bytes,
        "text_column": cfg.text_column,
    }
    root: Path | None = None
    files: list[Path] = []
    size: int | None = None
    if cfg.source == "pystdlib":
        root, files = stdlib.stdlib_files()
        parts["python"] = sys.version
        parts["files"] = [(f.as_posix(), (root / f).stat().st_size) for f in files]
        parts["split"] = stdlib.STDLIB_SPLIT
        size = sum((root / f).stat().st_size for f in files)
    elif cfg.source == "hub":
        parts.update(name=cfg.name, subset=cfg.subset, split=cfg.split)
        if cfg.path:
            local = resolve_path(cfg.path)
            if local.is_dir():
                root, files = local, [f for f in local.rglob("*") if f.is_file()]
            else:
                files = resolve_files(cfg.path)
            parts["files"] = file_stats(files)
    elif cfg.source != "tokens":
        assert cfg.path is not None
        files = resolve_files(cfg.path)
        parts["files"] = file_stats(files)
        if cfg.source in ("text", "json"):  # text and JSON hold at least as many bytes as their text
            size = sum(f.stat().st_size for f in files)
    if cfg.max_bytes is not None:
        size = cfg.max_bytes if size is None else min(size, cfg.max_bytes)
    return SourcePlan(
        kind=cfg.source,
        path=cfg.path,
        files=tuple(files),
        root=root,
        name=cfg.name,
        subset=cfg.subset,
        split=cfg.split,
        text_column=cfg.text_column,
        max_bytes=cfg.max_bytes,
        doc_separator=cfg.doc_separator,
        streaming=cfg.streaming,
        hf_cache=resolve_path(cfg.cache_dir) / "hf_datasets",
        fingerprint=stable_hash(parts),
        size_bound=size,
    )


# ---------------------------------------------------------------- tokenizer


def sample_tag(budget: int | None, known_bytes: int | None) -> str:
    """The cache-key part of the BPE training sample: empty when every train document is read (no
    budget, or a source known to be no larger than it), so caches made before the budget stay valid."""
    if budget is None or (known_bytes is not None and known_bytes <= budget):
        return ""
    return f":sample{budget}"


def resolve_tokenizer(cfg: DataConfig, source: SourcePlan) -> TokenizerPlan:
    """The checked tokenizer settings, its file resolved, its identity (known before any training)."""
    check_tokenizer_settings(cfg)
    file: Path | None = None
    bpe_dir: Path | None = None
    encoding = cfg.tiktoken_encoding
    if cfg.tokenizer == "byte":
        identity = "byte"
    elif cfg.tokenizer == "bpe":
        trainer = "" if cfg.bpe_trainer == "tokenizers" else f":{cfg.bpe_trainer}"  # old caches stay valid
        sample = sample_tag(cfg.bpe_train_bytes, source.size_bound)
        identity = f"bpe{cfg.bpe_vocab_size}:{source.fingerprint}:{cfg.val_fraction}{trainer}{sample}"
        key = hashlib.sha256(identity.encode()).hexdigest()[:16]
        bpe_dir = resolve_path(cfg.cache_dir) / "tokenizers" / f"bpe{cfg.bpe_vocab_size}-{key}"
    elif cfg.tokenizer == "tiktoken":
        identity = tiktoken_identity(encoding)  # loads a .tiktoken file: a bad one is refused here
        if encoding not in known_encodings():
            encoding = str(resolve_path(encoding))
    else:
        file = pretrained_file(cfg.tokenizer_path)
        identity = f"pretrained:{hashlib.sha256(file.read_bytes()).hexdigest()[:16]}"
    return TokenizerPlan(
        kind=cfg.tokenizer,
        identity=identity,
        bpe_vocab_size=cfg.bpe_vocab_size,
        bpe_trainer=cfg.bpe_trainer,
        bpe_train_bytes=cfg.bpe_train_bytes,
        bpe_encoder=cfg.bpe_encoder,
        tiktoken_encoding=encoding,
        pretrained_file=file,
        bpe_dir=bpe_dir,
    )


# ---------------------------------------------------------------- the whole plan


def resolve(cfg: DataConfig) -> DataPlan:
    """The data config of a text source resolved once (checks in the order the pipeline always made
    them: the split, the source, the tokenizer)."""
    val_period(cfg.val_fraction)
    source = resolve_source(cfg)
    tokenizer = resolve_tokenizer(cfg, source)
    parts = {
        "format": FORMAT_VERSION,
        "source": source.fingerprint,
        "tokenizer": tokenizer.identity,
        "val_fraction": cfg.val_fraction,
        "max_bytes": cfg.max_bytes,
        "doc_separator": cfg.doc_separator,
        "streaming": source.streamed,
    }
    return DataPlan(
        source=source,
        tokenizer=tokenizer,
        val_fraction=cfg.val_fraction,
        cache_root=resolve_path(cfg.cache_dir),
        key=stable_hash(parts),
        num_proc=max(1, cfg.num_proc),
    )


def _shard_files(pattern: str, field_name: str) -> list[Path]:
    try:
        return resolve_files(pattern)
    except FileNotFoundError as e:
        raise FileNotFoundError(str(e).replace("data.path=", f"{field_name}=", 1)) from None


def resolve_shards(cfg: DataConfig) -> ShardsPlan:
    """data.source=tokens resolved: the val shards (data.val_path), the train shards without them."""
    if not cfg.path:
        raise ValueError("data.path is required for data.source=tokens (a .bin file, directory or glob)")
    val = _shard_files(cfg.val_path, "data.val_path") if cfg.val_path else []
    train = [f for f in _shard_files(cfg.path, "data.path") if f not in set(val)]
    if cfg.vocab_size is not None and cfg.vocab_size < 1:
        raise ValueError(f"data.vocab_size={cfg.vocab_size!r} must be a positive integer or null")
    return ShardsPlan(
        path=cfg.path,
        train_files=tuple(train),
        val_files=tuple(val),
        token_dtype=cfg.token_dtype,
        vocab_size=cfg.vocab_size,
        tokenizer_path=cfg.tokenizer_path,
        tokenizer_file=pretrained_file(cfg.tokenizer_path) if cfg.tokenizer_path else None,
        val_fraction=cfg.val_fraction,
        cache_root=resolve_path(cfg.cache_dir),
    )
