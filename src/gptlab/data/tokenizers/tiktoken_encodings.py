"""tiktoken encodings as a tokenizer (data.tokenizer=tiktoken data.tiktoken_encoding=NAME|PATH).

A name is one of tiktoken's (gpt2, cl100k_base, o200k_base, ...), loaded from tiktoken's cache
($TIKTOKEN_CACHE_DIR) or downloaded once; a path is a `.tiktoken` file (one `<base64 token> <rank>` a
line), read with GPT-2's split pattern and `<|endoftext|>` as the id after its last rank. The
vocabulary is padded to a multiple of 64 for the embedding (GPT-2's 50,257 ids become 50,304, as in
nanoGPT); the padding ids are never produced and decode to nothing.

Saved like every other kind as a tokenizer.json (a byte-level BPE with the encoding's split pattern,
its merges recovered from the ranks), so checkpoints, generate.py and HF export need nothing new; the
`.tiktoken` file and the pattern are saved beside it so `load_tokenizer` rebuilds the fast encoder.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import logging
import os
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import tiktoken
import tokenizers
from tokenizers import decoders, models, pre_tokenizers

from gptlab.data.paths import resolve_path
from gptlab.data.tokenizer_files import TOKENIZER_CONFIG_FILE, TOKENIZER_FILE
from gptlab.data.tokenizers.tiktoken_bpe import GPT2_PATTERN, bytes_to_unicode, encode_batch

log = logging.getLogger(__name__)

EOT = "<|endoftext|>"
RANKS_FILE = "tokenizer.tiktoken"  # written beside tokenizer.json by save()
PAD_TO = 64  # the embedding's vocabulary is a multiple of this (nanoGPT: 50257 -> 50304)
MAX_IDS = 1 << 32  # the widest token files (uint32) hold ids below this
# The largest vocabulary accepted: 2^24 ids, 64x Gemma 3's 262,144 (among the largest published). Ranks
# above it are sparse files or mistakes: the embedding is vocab x d_model floats whatever the file holds
# (2^31 ids at d_model=32 in fp32: 256 GiB), and at 2^24 ids GPT-2 small's width already needs 48 GiB.
MAX_VOCAB = 1 << 24
EMBED_WIDTH = 768  # the width the refusal's embedding size is quoted at (GPT-2 small), fp32


def known_encodings() -> list[str]:
    """tiktoken's encoding names."""
    return sorted(tiktoken.list_encoding_names())


def _is_path(value: str) -> bool:
    return value.endswith(".tiktoken") or os.sep in value or Path(value).is_file()


def padded(n_ids: int) -> int:
    """n_ids rounded up to a multiple of PAD_TO."""
    return -(-n_ids // PAD_TO) * PAD_TO


def _check_vocabulary(rank: int, n: int, path: Path, setting: str) -> None:
    """Refuse a rank whose vocabulary (the rank, <|endoftext|> after it, padding) no token file or
    no embedding could hold, before anything is packed or allocated."""
    vocab = padded(rank + 2)
    if vocab > MAX_IDS:
        raise ValueError(
            f"{setting}: line {n} of {path} has rank {rank}: its vocabulary would not fit the "
            f"widest token files (uint32, ids below {MAX_IDS}); refused before packing"
        )
    if vocab > MAX_VOCAB:
        gib = vocab * EMBED_WIDTH * 4 / 2**30
        raise ValueError(
            f"{setting}: line {n} of {path} has rank {rank}: a vocabulary of {vocab:,} ids, whose "
            f"embedding is {gib:,.0f} GiB at d_model={EMBED_WIDTH} in fp32; accepted: ranks up to "
            f"{MAX_VOCAB - 2:,} (vocabularies up to {MAX_VOCAB:,} ids); refused before packing"
        )


def read_ranks(path: Path, setting: str) -> dict[bytes, int]:
    """A .tiktoken file's ranks; a line that does not parse is named (and refused) by its number."""
    ranks: dict[bytes, int] = {}
    line_of: dict[int, int] = {}  # rank -> its line
    token_line: dict[bytes, int] = {}
    for n, raw in enumerate(path.read_bytes().splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            token_b64, rank_text = raw.split()
            token = base64.b64decode(token_b64, validate=True)
            rank = int(rank_text)
            if rank < 0 or not token:
                raise ValueError
        except (ValueError, binascii.Error):
            shown = raw[:60].decode("utf-8", errors="replace")
            raise ValueError(
                f"{setting}: line {n} of {path} is not '<base64 token> <rank>' ({shown!r})"
            ) from None
        if token in token_line or rank in line_of:
            what, first = ("token", token_line[token]) if token in token_line else ("rank", line_of[rank])
            raise ValueError(
                f"{setting}: line {n} of {path} repeats the {what} of line {first}; "
                "accepted: each token and each rank once"
            )
        _check_vocabulary(rank, n, path, setting)
        ranks[token] = rank
        line_of[rank] = n
        token_line[token] = n
    missing = [b for b in range(256) if bytes([b]) not in ranks]
    if missing:
        raise ValueError(
            f"{setting}: {path} lacks {len(missing)} of the 256 single-byte tokens (e.g. byte {missing[0]}); "
            "tiktoken could not encode every text"
        )
    return ranks


def load_encoding(value: str) -> tiktoken.Encoding:
    """The Encoding data.tiktoken_encoding names: a tiktoken name, or a .tiktoken file's path."""
    setting = f"data.tiktoken_encoding={value!r}"
    if not value:
        raise ValueError(f"data.tiktoken_encoding is required for data.tokenizer=tiktoken ({_choices()})")
    if value in known_encodings():
        try:
            return tiktoken.get_encoding(value)
        except Exception as e:  # no network and no cached file: requests' or tiktoken's own error
            raise ValueError(
                f"{setting}: tiktoken could not load it ({type(e).__name__}: {str(e)[:120]}); it is "
                "downloaded once into $TIKTOKEN_CACHE_DIR, or give the path of a .tiktoken file"
            ) from None
    if not _is_path(value):
        raise ValueError(f"{setting} is not a known encoding; {_choices()}")
    path = resolve_path(value)
    if not path.is_file():
        raise FileNotFoundError(f"{setting}: {path} does not exist; {_choices()}")
    ranks = read_ranks(path, setting)
    eot = max(ranks.values()) + 1
    return tiktoken.Encoding(
        f"file:{path.stem}", pat_str=GPT2_PATTERN, mergeable_ranks=ranks, special_tokens={EOT: eot}
    )


def _choices() -> str:
    return f"choose one of {', '.join(known_encodings())}, or the path of a .tiktoken file"


def identity(value: str) -> str:
    """What makes the encoding's ids differ (keys the packed cache): its name, or its file's bytes."""
    if value in known_encodings():
        return f"tiktoken:{value}"
    enc = load_encoding(value)  # refuses a bad file before anything is packed
    digest = hashlib.sha256(resolve_path(value).read_bytes()).hexdigest()[:16]
    return f"tiktoken:{enc.name}:{digest}"


def _merge_parts(ranks: dict[bytes, int], token: bytes, rank: int) -> list[bytes]:
    """token's pieces after tiktoken's merging with the ranks below its own (2 for a real merge)."""
    parts = [token[i : i + 1] for i in range(len(token))]
    while len(parts) > 1:
        best = None
        for i in range(len(parts) - 1):
            r = ranks.get(parts[i] + parts[i + 1])
            if r is not None and r < rank and (best is None or r < best[0]):
                best = (r, i)
        if best is None:
            break
        i = best[1]
        parts[i : i + 2] = [parts[i] + parts[i + 1]]
    return parts


def to_hf(enc: tiktoken.Encoding) -> tokenizers.Tokenizer:
    """The encoding as a `tokenizers` byte-level BPE (its split pattern, merges recovered from ranks)."""
    ranks = enc._mergeable_ranks  # tiktoken keeps no public accessor for the ranks
    table = bytes_to_unicode()

    def text(b: bytes) -> str:
        return "".join(table[x] for x in b)

    vocab = {text(tok): rank for tok, rank in ranks.items()}
    merges = []
    for tok, rank in sorted(ranks.items(), key=lambda kv: kv[1]):
        if len(tok) > 1:
            parts = _merge_parts(ranks, tok, rank)
            if len(parts) == 2:
                merges.append((text(parts[0]), text(parts[1])))
    vocab.update(enc._special_tokens)
    hf = tokenizers.Tokenizer(models.BPE(vocab=vocab, merges=merges, ignore_merges=True))
    if enc._pat_str == GPT2_PATTERN:  # ByteLevel's own split is GPT-2's: the plain byte-level BPE
        hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    else:
        hf.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Split(tokenizers.Regex(enc._pat_str), behavior="isolated"),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
            ]
        )
    hf.decoder = decoders.ByteLevel()
    hf.add_special_tokens(
        [tokenizers.AddedToken(s, special=True, normalized=False) for s in enc._special_tokens]
    )
    return hf


class TiktokenTokenizer:
    """A tiktoken Encoding behind the Tokenizer protocol; ids are tiktoken's own."""

    threads = max(1, len(os.sched_getaffinity(0)))  # encode_batch threads (the streaming pool divides them)

    def __init__(self, enc: tiktoken.Encoding, name: str | None = None) -> None:
        self.enc = enc
        self.name = name or f"tiktoken:{enc.name}"
        self.eos_id: int | None = enc._special_tokens.get(EOT)
        self.n_ids = enc.n_vocab
        self.vocab_size = padded(enc.n_vocab)
        if self.vocab_size > MAX_IDS:
            raise ValueError(
                f"{self.name}: {enc.n_vocab} ids do not fit the widest token files (uint32); "
                "refused before packing"
            )
        self._hf_json: str | None = None

    @classmethod
    def from_setting(cls, value: str) -> TiktokenTokenizer:
        """The tokenizer of data.tiktoken_encoding."""
        return cls(load_encoding(value))

    def encode(self, text: str) -> list[int]:
        """Ids of text as ordinary text (tiktoken's encode_ordinary): a <|endoftext|> written in the
        text is its characters, as with the other tokenizers; packing adds the EOS ids."""
        return self.enc.encode_ordinary(text)

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        """Ids of each text, on `threads` threads."""
        return encode_batch(self.enc, texts, self.threads)

    def decode(self, ids: Iterable[int]) -> str:
        """Text of ids; padding ids (and any id the encoding lacks) decode to nothing."""
        arr = np.asarray(list(ids) if not isinstance(ids, np.ndarray) else ids, dtype=np.int64)
        keep = [int(i) for i in arr if 0 <= i < self.n_ids]
        try:
            raw = self.enc.decode_bytes(keep)
        except (KeyError, ValueError):  # an id in a gap of the ranks
            raw = b"".join(self._token_bytes(i) for i in keep)
        return raw.decode("utf-8", errors="replace")

    def _token_bytes(self, i: int) -> bytes:
        try:
            return self.enc.decode_single_token_bytes(i)
        except (KeyError, ValueError):
            return b""

    def hf_json(self) -> str:
        """tokenizer.json text of the same BPE (built once: recovering merges takes ~1 s per 50k ids)."""
        if self._hf_json is None:
            self._hf_json = to_hf(self.enc).to_str()
        return self._hf_json

    def save(self, directory: str | os.PathLike[str]) -> Path:
        """tokenizer.json + tokenizer_config.json (as every kind), and the ranks to rebuild tiktoken."""
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        (out / TOKENIZER_FILE).write_text(self.hf_json())
        lines = (
            base64.b64encode(tok).decode() + f" {rank}\n"
            for tok, rank in sorted(self.enc._mergeable_ranks.items(), key=lambda kv: kv[1])
        )
        (out / RANKS_FILE).write_text("".join(lines))
        config = {
            "tokenizer_class": "PreTrainedTokenizerFast",
            "eos_token": EOT if self.eos_id is not None else None,
            "gptlab_name": self.name,
            "tiktoken": {
                "name": self.enc.name,
                "pat_str": self.enc._pat_str,
                "special_tokens": self.enc._special_tokens,
            },
        }
        (out / TOKENIZER_CONFIG_FILE).write_text(json.dumps(config, indent=2) + "\n")
        return out / TOKENIZER_FILE

    @classmethod
    def load(cls, directory: str | os.PathLike[str]) -> TiktokenTokenizer:
        """Rebuild a saved one (its ranks, pattern and special tokens)."""
        root = Path(directory)
        config = json.loads((root / TOKENIZER_CONFIG_FILE).read_text())
        t = config["tiktoken"]
        ranks = read_ranks(root / RANKS_FILE, f"{root / RANKS_FILE}")
        enc = tiktoken.Encoding(
            t["name"], pat_str=t["pat_str"], mergeable_ranks=ranks, special_tokens=t["special_tokens"]
        )
        return cls(enc, name=config["gptlab_name"])
