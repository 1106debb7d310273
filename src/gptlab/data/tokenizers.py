"""Tokenizers behind one protocol: raw bytes, a BPE trained on the corpus, or a tokenizer.json."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np
import tiktoken
import tokenizers
from tokenizers import decoders, models, pre_tokenizers, trainers

from gptlab.data.config import BPE_TRAINERS, TOKENIZERS, DataConfig
from gptlab.data.sources import resolve_path, source_fingerprint, source_size_bound
from gptlab.data.tiktoken_bpe import (
    BPE_ENCODERS,
    GPT2_PATTERN,
    bytes_to_unicode,
    checked_encoding,
    encode_batch,
)
from gptlab.data.tiktoken_encodings import TiktokenTokenizer
from gptlab.data.tiktoken_encodings import identity as tiktoken_identity
from gptlab.data.tiktoken_encodings import to_hf as tiktoken_to_hf
from gptlab.data.tokenizer_files import EOS_CANDIDATES as _EOS_CANDIDATES  # tried when no config names one
from gptlab.data.tokenizer_files import TOKENIZER_CONFIG_FILE as CONFIG_FILE
from gptlab.data.tokenizer_files import TOKENIZER_FILE

log = logging.getLogger(__name__)

EOT = "<|endoftext|>"
BYTE_EOS = 0xFF  # the byte tokenizer's end-of-text id: a byte value UTF-8 never uses


@runtime_checkable
class Tokenizer(Protocol):
    """What packing, the datamodule, generation and exporters need from a tokenizer."""

    name: str
    vocab_size: int
    eos_id: int | None

    def encode(self, text: str) -> list[int] | np.ndarray: ...

    def encode_batch(self, texts: list[str]) -> list[list[int]] | list[np.ndarray]: ...

    def decode(self, ids: Iterable[int]) -> str: ...

    def save(self, directory: str | os.PathLike[str]) -> Path: ...


def _write_config(directory: Path, name: str, eos: str | None) -> None:
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": eos, "gptlab_name": name}
    (directory / CONFIG_FILE).write_text(json.dumps(config, indent=2) + "\n")


class ByteTokenizer:
    """UTF-8 bytes as ids 0..255: no training, no unknown tokens, and bits-per-byte is exact.

    The end-of-text id is 255 (BYTE_EOS): the byte 0xFF never occurs in UTF-8, and inputs are checked
    to be UTF-8, so it cannot collide with text and the vocabulary stays 256 (model shapes, old
    checkpoints and exported tokenizers are unchanged).
    """

    name = "byte"
    vocab_size = 256
    eos_id: int | None = BYTE_EOS

    def encode(self, text: str) -> np.ndarray:
        """Ids of text (its UTF-8 bytes)."""
        return np.frombuffer(text.encode("utf-8"), dtype=np.uint8)

    def encode_batch(self, texts: list[str]) -> list[np.ndarray]:
        """Ids of each text."""
        return [self.encode(t) for t in texts]

    def decode(self, ids: Iterable[int]) -> str:
        """Text of ids, BYTE_EOS shown as <|endoftext|>; a sequence cut mid-character decodes with
        U+FFFD instead of failing."""
        arr = np.asarray(list(ids) if not isinstance(ids, np.ndarray) else ids)
        if arr.size and (arr.min() < 0 or arr.max() > 255):
            raise ValueError(f"byte tokenizer ids must be in 0..255, got {arr.min()}..{arr.max()}")
        parts = arr.astype(np.uint8).tobytes().split(bytes([BYTE_EOS]))
        return EOT.join(p.decode("utf-8", errors="replace") for p in parts)

    def to_hf(self) -> tokenizers.Tokenizer:
        """The same mapping as a `tokenizers` object (byte-level BPE without merges, id = byte)."""
        vocab = {ch: b for b, ch in bytes_to_unicode().items()}
        tok = tokenizers.Tokenizer(models.BPE(vocab=vocab, merges=[]))
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
        tok.decoder = decoders.ByteLevel()
        return tok

    def save(self, directory: str | os.PathLike[str]) -> Path:
        """Write tokenizer.json (+ tokenizer_config.json) so exporters ship one format for all."""
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        self.to_hf().save(str(out / TOKENIZER_FILE))
        _write_config(out, self.name, None)
        return out / TOKENIZER_FILE


class HFTokenizer:
    """A `tokenizers.Tokenizer` behind the protocol (shared by the BPE and pretrained kinds).

    `fast`, when set (`use_tiktoken`), is the same BPE as a tiktoken Encoding whose ids were checked
    identical to `tokenizers`' on a sample of the corpus: encoding then goes through tiktoken."""

    fast: tiktoken.Encoding | None = None
    threads = max(1, len(os.sched_getaffinity(0)))  # tiktoken's encode_batch threads: the usable cores

    def __init__(self, tok: tokenizers.Tokenizer, name: str, eos_id: int | None) -> None:
        self.tok = tok
        self.name = name
        self.eos_id = eos_id
        self.vocab_size = tok.get_vocab_size(with_added_tokens=True)

    def use_tiktoken(self, texts: Iterable[str], mode: str = "auto") -> bool:
        """Encode through tiktoken from now on if the conversion is exact on texts (+ probes)."""
        self.fast = checked_encoding(self.tok, texts, mode, name=f"gptlab-{self.name}")
        return self.fast is not None

    def encode(self, text: str) -> list[int]:
        """Ids of text, without the post-processor's special tokens (packing adds EOS itself)."""
        if self.fast is not None:
            return self.fast.encode(text, allowed_special="all")
        return self.tok.encode(text, add_special_tokens=False).ids

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        """Ids of each text, encoded in parallel by the Rust library (tiktoken's, when checked)."""
        if self.fast is not None:
            return encode_batch(self.fast, texts, self.threads)
        fast = getattr(self.tok, "encode_batch_fast", None)  # skips offsets (tokenizers >= 0.21)
        encs = (fast or self.tok.encode_batch)(texts, add_special_tokens=False)
        return [e.ids for e in encs]

    def decode(self, ids: Iterable[int]) -> str:
        """Text of ids, special tokens kept so document boundaries stay visible."""
        return self.tok.decode([int(i) for i in ids], skip_special_tokens=False)

    def eos_token(self) -> str | None:
        """The EOS token's text, or None."""
        return None if self.eos_id is None else self.tok.id_to_token(self.eos_id)

    def save(self, directory: str | os.PathLike[str]) -> Path:
        """Write tokenizer.json (+ tokenizer_config.json naming the EOS token)."""
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        self.tok.save(str(out / TOKENIZER_FILE))
        _write_config(out, self.name, self.eos_token())
        return out / TOKENIZER_FILE


class BPETokenizer(HFTokenizer):
    """Byte-level BPE trained on the train documents, with <|endoftext|> between documents."""

    @classmethod
    def train(cls, texts: Iterable[str], vocab_size: int) -> BPETokenizer:
        """Train a byte-level BPE of vocab_size ids (256 bytes + EOS + merges)."""
        tok = tokenizers.Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size,
            special_tokens=[EOT],
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        )
        tok.train_from_iterator(_batched(texts, 256), trainer=trainer)
        return cls(tok, f"bpe{vocab_size}", tok.token_to_id(EOT))

    @classmethod
    def train_rustbpe(cls, texts: Iterable[str], vocab_size: int) -> BPETokenizer:
        """The same kind of BPE trained by rustbpe: 256 byte ids in byte order, the merges, then
        <|endoftext|> (rustbpe knows no special tokens), written as a plain byte-level tokenizer.json."""
        try:
            import rustbpe
        except ImportError:
            raise ValueError(
                "data.bpe_trainer=rustbpe needs the rustbpe package (pip install rustbpe)"
            ) from None
        trainer = rustbpe.Tokenizer()
        trainer.train_from_iterator(iter(texts), vocab_size - 1, pattern=GPT2_PATTERN)
        ranks = dict(trainer.get_mergeable_ranks())
        enc = tiktoken.Encoding(
            "rustbpe", pat_str=GPT2_PATTERN, mergeable_ranks=ranks, special_tokens={EOT: len(ranks)}
        )
        tok = tiktoken_to_hf(enc)
        return cls(tok, f"bpe{vocab_size}", tok.token_to_id(EOT))

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> BPETokenizer:
        """Reload a trained BPE from its tokenizer.json."""
        tok = tokenizers.Tokenizer.from_file(str(path))
        return cls(tok, f"bpe{tok.get_vocab_size(with_added_tokens=True)}", tok.token_to_id(EOT))


class PretrainedTokenizer(HFTokenizer):
    """A local tokenizer.json (e.g. GPT-2's): reuse an existing vocabulary, no training."""

    def __init__(self, path: str | os.PathLike[str], name: str | None = None) -> None:
        file = pretrained_file(path)
        tok = tokenizers.Tokenizer.from_file(str(file))
        super().__init__(tok, name or f"pretrained:{file.parent.name}", _find_eos(tok, file.parent))


class IdTokenizer(HFTokenizer):
    """Pre-tokenized shards without their tokenizer (only data.vocab_size): id i is the word "<i>".

    A WordLevel tokenizer.json, so checkpoints, generate.py and exporters handle it like any other;
    samples then read as ids ("<464> <3290> ..."): give data.tokenizer_path to see text.
    """

    @classmethod
    def of_size(cls, vocab_size: int) -> IdTokenizer:
        """The id tokenizer of vocab_size ids."""
        vocab = {f"<{i}>": i for i in range(vocab_size)}
        tok = tokenizers.Tokenizer(models.WordLevel(vocab=vocab, unk_token="<0>"))
        tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
        return cls(tok, f"ids{vocab_size}", None)


def _batched(texts: Iterable[str], n: int) -> Iterator[list[str]]:
    batch: list[str] = []
    for t in texts:
        batch.append(t)
        if len(batch) == n:
            yield batch
            batch = []
    if batch:
        yield batch


def pretrained_file(path: str | os.PathLike[str] | None) -> Path:
    """The tokenizer.json that data.tokenizer_path names (the file, or a directory holding one)."""
    if not path:
        raise ValueError(
            "data.tokenizer_path is required for data.tokenizer=pretrained "
            "(a tokenizer.json file or a directory holding one)"
        )
    p = resolve_path(path)
    file = p / TOKENIZER_FILE if p.is_dir() else p
    if not file.is_file():
        raise FileNotFoundError(
            f"data.tokenizer_path={str(path)!r}: {file} does not exist; "
            f"accepted: a {TOKENIZER_FILE} file or a directory holding one"
        )
    return file


def _find_eos(tok: tokenizers.Tokenizer, directory: Path) -> int | None:
    config = directory / CONFIG_FILE
    if config.is_file():
        settings = json.loads(config.read_text())
        if "eos_token" in settings:  # the config decides, also when it says "no EOS" (null)
            eos = settings["eos_token"]
            if isinstance(eos, dict):
                eos = eos.get("content")
            return tok.token_to_id(eos) if isinstance(eos, str) else None
    for candidate in _EOS_CANDIDATES:
        if (tid := tok.token_to_id(candidate)) is not None:
            return tid
    return None


def load_tokenizer(directory: str | os.PathLike[str]) -> Tokenizer:
    """Reload any tokenizer written by `save` (the byte kind comes back as the fast native one)."""
    directory = Path(directory)
    config = directory / CONFIG_FILE
    name = json.loads(config.read_text()).get("gptlab_name") if config.is_file() else None
    if name == ByteTokenizer.name:
        return ByteTokenizer()
    if name and name.startswith("bpe"):
        return BPETokenizer.from_file(directory / TOKENIZER_FILE)
    if name and name.startswith("tiktoken:") and (directory / "tokenizer.tiktoken").is_file():
        return TiktokenTokenizer.load(directory)
    if name and name.startswith("ids"):
        return IdTokenizer(tokenizers.Tokenizer.from_file(str(directory / TOKENIZER_FILE)), name, None)
    return PretrainedTokenizer(directory, name=name)


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


def tokenizer_identity(cfg: DataConfig, source_fp: str | None = None) -> str:
    """What makes token ids differ, known before any training (keys the packed-token cache)."""
    check_tokenizer_settings(cfg)
    if cfg.tokenizer == "byte":
        return "byte"
    if cfg.tokenizer == "bpe":
        source_fp = source_fp or source_fingerprint(cfg)
        trainer = "" if cfg.bpe_trainer == "tokenizers" else f":{cfg.bpe_trainer}"  # old caches stay valid
        sample = sample_tag(cfg, source_size_bound(cfg))
        return f"bpe{cfg.bpe_vocab_size}:{source_fp}:{cfg.val_fraction}{trainer}{sample}"
    if cfg.tokenizer == "tiktoken":
        return tiktoken_identity(cfg.tiktoken_encoding)
    digest = hashlib.sha256(pretrained_file(cfg.tokenizer_path).read_bytes()).hexdigest()[:16]
    return f"pretrained:{digest}"


def training_sample(texts: Iterable[str], budget: int | None, total: int | None) -> Iterator[str]:
    """At most `budget` UTF-8 bytes of `texts` (whole documents) to train a BPE on.

    When the texts' total size is known they are thinned evenly: a document is kept while the bytes
    kept so far are behind budget/total of the bytes seen, so the sample spans the whole split, not
    its first part (a corpus concatenated source by source would otherwise train on one source).
    Unknown total (a streamed hub set): the first `budget` bytes. Reading stops once it is full."""
    if budget is None:
        yield from texts
        return
    share = 1.0 if not total or total <= budget else budget / total
    kept = seen = 0
    for text in texts:
        if kept >= budget:
            return
        n = len(text.encode("utf-8"))
        if kept <= seen * share:
            kept += n
            yield text
        seen += n


def sample_tag(cfg: DataConfig, known_bytes: int | None) -> str:
    """The cache-key part of the training sample: empty when every train document is read (no
    budget, or a source known to be no larger than it), so caches made before the budget stay valid."""
    budget = cfg.bpe_train_bytes
    if budget is None or (known_bytes is not None and known_bytes <= budget):
        return ""
    return f":sample{budget}"


def _cached_bpe(
    cfg: DataConfig,
    documents_fn: Callable[[], Iterable[str]],
    source_fp: str,
    train_bytes: Callable[[], int | None] | None = None,
) -> BPETokenizer:
    key = hashlib.sha256(tokenizer_identity(cfg, source_fp).encode()).hexdigest()[:16]
    out = resolve_path(cfg.cache_dir) / "tokenizers" / f"bpe{cfg.bpe_vocab_size}-{key}"
    file = out / TOKENIZER_FILE
    if file.is_file():
        log.info("using cached BPE tokenizer at %s", file)
        return BPETokenizer.from_file(file)
    log.info(
        "training a byte-level BPE with %d ids on the train documents (%s)",
        cfg.bpe_vocab_size,
        cfg.bpe_trainer,
    )
    train = BPETokenizer.train_rustbpe if cfg.bpe_trainer == "rustbpe" else BPETokenizer.train
    budget = cfg.bpe_train_bytes
    total = train_bytes() if train_bytes is not None and budget is not None else None  # only when training
    if budget is not None and (total is None or total > budget):
        how = "spread over" if total else "the first bytes of (size unknown)"
        log.info("BPE training sample: %d bytes %s the train documents (data.bpe_train_bytes)", budget, how)
    bpe = train(training_sample(documents_fn(), budget, total), cfg.bpe_vocab_size)
    if bpe.vocab_size < cfg.bpe_vocab_size:
        log.warning(
            "BPE reached only %d of data.bpe_vocab_size=%d ids: the corpus has too few merges",
            bpe.vocab_size,
            cfg.bpe_vocab_size,
        )
    out.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=out, suffix=".tmp")
    os.close(fd)
    bpe.tok.save(tmp)
    os.replace(tmp, file)  # atomic: a concurrent reader sees the whole file or none
    return bpe


def build_tokenizer(
    cfg: DataConfig,
    documents_fn: Callable[[], Iterable[str]],
    source_fp: str | None = None,
    sample_fn: Callable[[], Iterable[str]] | None = None,
    train_bytes: Callable[[], int | None] | None = None,
) -> Tokenizer:
    """The configured tokenizer; documents_fn (train texts) and train_bytes (their size, when it
    can be known) are only called when BPE must train, which reads up to data.bpe_train_bytes.

    A BPE is then encoded through tiktoken if data.bpe_encoder allows and its ids are identical to
    `tokenizers`' on the first texts of sample_fn (packing passes the train texts) and the probes."""
    check_tokenizer_settings(cfg)
    if cfg.tokenizer == "byte":
        return ByteTokenizer()
    if cfg.tokenizer == "tiktoken":
        return TiktokenTokenizer.from_setting(cfg.tiktoken_encoding)
    if cfg.tokenizer == "bpe":
        tok: HFTokenizer = _cached_bpe(cfg, documents_fn, source_fp or source_fingerprint(cfg), train_bytes)
    else:
        tok = PretrainedTokenizer(cfg.tokenizer_path or "")
    tok.use_tiktoken(
        sample_fn() if sample_fn else (), cfg.bpe_encoder
    )  # ids are the same either way: not in the fingerprint
    return tok
