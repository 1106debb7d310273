"""A byte-level BPE tokenizer.json encoded through tiktoken, with the same ids as `tokenizers`.

`tokenizers` and tiktoken run the same algorithm for a GPT-2-style BPE: split the text at special
tokens, split each part with GPT-2's regular expression, map each piece's bytes to tokens by
merging adjacent pairs in rank order. tiktoken ranks a pair by its merged token's id while
`tokenizers` ranks it by its merge rule's position, so the conversion is exact when ids grow with
the merge order and every multi-byte token is a merge's result; tiktoken also merges two adjacent
tokens whose bytes form a token made by another split, which `tokenizers` never does. That case
cannot be ruled out from the file alone, so `checked_encoding` compares both encoders' ids on a
sample of the corpus (and on probe strings) before tiktoken is trusted; anything else falls back to
`tokenizers` with the reason.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor

import tiktoken
import tokenizers
from tokenizers import pre_tokenizers

log = logging.getLogger(__name__)

# GPT-2's split pattern as tiktoken writes it; `tokenizers`' ByteLevel(use_regex=True) uses the same
GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
BPE_ENCODERS = ("auto", "tiktoken", "tokenizers")
SAMPLE_BYTES = 256 << 10  # corpus text both encoders must agree on before tiktoken packs (~0.1 s)
# strings the sample may lack: unicode, whitespace runs, digits, contractions, the separator
PROBES = (
    "Hello, world! It's 2026; we'll see 3.14159 and 1,000,000 — ok?",
    "ünïcödé 日本語のテキスト 🙂🚀 ﷽ e\u0301 \u200b",
    "tabs\t\tand\n\n\nnewlines   three spaces    four\r\n \n  ",
    "  leading and trailing  ",
    "12345678901234567890 x2 2x 00 007",
    "one<|endoftext|>two <|endoftext|> three<|endoftext|>",
    "I'M YOU'RE they've she'd 'tis ''",
    "",
)


class NotConvertible(ValueError):
    """The tokenizer cannot be encoded by tiktoken with the same ids; the message says why."""


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte→printable-char table, so a byte tokenizer can be written as a tokenizer.json.

    Read off `tokenizers`' ByteLevel alphabet: a byte whose own character is in the alphabet keeps
    it, the others take the alphabet's characters above U+00FF in order (GPT-2's rule).
    """
    alphabet = set(pre_tokenizers.ByteLevel.alphabet())
    spare = iter(sorted(c for c in alphabet if ord(c) > 0xFF))
    return {b: chr(b) if chr(b) in alphabet else next(spare) for b in range(256)}


def _byte_decoder() -> dict[str, int]:
    return {ch: b for b, ch in bytes_to_unicode().items()}


def _token_bytes(token: str, table: dict[str, int]) -> bytes:
    try:
        return bytes(table[ch] for ch in token)
    except KeyError as e:
        raise NotConvertible(f"token {token!r} is not byte-level (character {e.args[0]!r})") from None


def to_tiktoken(tok: tokenizers.Tokenizer, name: str = "gptlab-bpe") -> tiktoken.Encoding:
    """The tiktoken Encoding of a byte-level BPE, or NotConvertible naming what stands in the way."""
    spec = json.loads(tok.to_str())
    model = spec.get("model") or {}
    if model.get("type") != "BPE":
        raise NotConvertible(f"its model is {model.get('type')}, not BPE")
    if spec.get("normalizer") is not None:
        raise NotConvertible(f"it has a normalizer ({spec['normalizer'].get('type')})")
    pre = spec.get("pre_tokenizer") or {}
    if pre.get("type") != "ByteLevel" or not pre.get("use_regex", True) or pre.get("add_prefix_space"):
        raise NotConvertible(
            f"its pre-tokenizer is not ByteLevel with GPT-2's split pattern and no prefix space ({pre})"
        )
    for key in ("dropout", "continuing_subword_prefix", "end_of_word_suffix", "byte_fallback"):
        if model.get(key):
            raise NotConvertible(f"its BPE model sets {key}={model[key]!r}")
    special: dict[str, int] = {}
    for added in spec.get("added_tokens") or []:
        flags = [k for k in ("lstrip", "rstrip", "single_word") if added.get(k)]
        if flags or (added.get("normalized") and not added.get("special")):
            raise NotConvertible(f"added token {added['content']!r} sets {', '.join(flags) or 'normalized'}")
        special[added["content"]] = int(added["id"])
    table = _byte_decoder()
    ranks: dict[bytes, int] = {}
    for token, tid in model["vocab"].items():
        if token in special and special[token] == tid:
            continue  # matched before the split, as tiktoken's special tokens are
        raw = _token_bytes(token, table)
        if raw in ranks:
            raise NotConvertible(f"two tokens have the bytes {raw!r}")
        ranks[raw] = int(tid)
    if sum(len(b) == 1 for b in ranks) != 256:
        raise NotConvertible("it lacks some of the 256 single-byte tokens")
    previous = -1
    for merge in model.get("merges") or []:
        a, b = merge if isinstance(merge, list) else merge.split(" ", 1)
        left, right = _token_bytes(a, table), _token_bytes(b, table)
        merged = ranks.get(left + right)
        if merged is None:
            raise NotConvertible(f"merge {a!r} + {b!r} makes no token of the vocabulary")
        if merged <= previous or merged <= ranks.get(left, -1) or merged <= ranks.get(right, -1):
            raise NotConvertible(f"token ids do not follow the merge order (merge {a!r} + {b!r})")
        previous = merged
    n_merges = len(model.get("merges") or [])
    if len(ranks) - 256 != n_merges:
        raise NotConvertible(f"{len(ranks) - 256} multi-byte tokens but {n_merges} merges")
    return tiktoken.Encoding(name, pat_str=GPT2_PATTERN, mergeable_ranks=ranks, special_tokens=special)


def ordinary(tok: tokenizers.Tokenizer) -> tokenizers.Tokenizer:
    """tok, set to read special tokens written in a text as ordinary text (as tiktoken's
    encode_ordinary does): a document that quotes <|endoftext|> is not split there, only packing's
    own separators are EOS ids. Returned for chaining; the setting is not saved in tokenizer.json."""
    tok.encode_special_tokens = True
    return tok


def encode_batch(enc: tiktoken.Encoding, texts: list[str], threads: int = 1) -> list[list[int]]:
    """Ids of each text as ordinary text (see `ordinary`), on `threads` threads over
    contiguous chunks: tiktoken's own encode_batch submits one task per text, whose Python overhead
    (~50 us a text) cost a third of the packing time on ~800-byte documents."""
    if threads <= 1 or len(texts) < 2 * threads:
        return [enc.encode_ordinary(t) for t in texts]
    size = -(-len(texts) // threads)
    chunks = [texts[i : i + size] for i in range(0, len(texts), size)]
    with ThreadPoolExecutor(len(chunks)) as pool:
        parts = pool.map(lambda chunk: [enc.encode_ordinary(t) for t in chunk], chunks)
        return [ids for part in parts for ids in part]


def first_mismatch(
    tok: tokenizers.Tokenizer, enc: tiktoken.Encoding, texts: Iterable[str]
) -> tuple[int, str] | None:
    """(index, text) of the first text whose ids differ between the two encoders, or None."""
    texts = list(texts)
    ours = enc.encode_ordinary_batch(texts)
    theirs = ordinary(tok).encode_batch(texts, add_special_tokens=False)
    for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
        if a != b.ids:
            return i, texts[i]
    return None


def sample(texts: Iterable[str], n_bytes: int = SAMPLE_BYTES) -> list[str]:
    """The first texts, up to n_bytes of UTF-8 in all, then the probe strings."""
    out: list[str] = []
    total = 0
    for t in texts:
        if total >= n_bytes:
            break
        out.append(t)
        total += len(t.encode("utf-8"))
    return out + list(PROBES)


def checked_encoding(
    tok: tokenizers.Tokenizer, texts: Iterable[str], mode: str = "auto", name: str = "gptlab-bpe"
) -> tiktoken.Encoding | None:
    """The tiktoken Encoding to pack with, or None for `tokenizers` (one log line says why).

    mode: auto (tiktoken when the conversion is exact on the sample), tiktoken (the same, an error
    otherwise), tokenizers (never tiktoken)."""
    if mode not in BPE_ENCODERS:
        raise ValueError(
            f"data.bpe_encoder={mode!r} is not accepted; choose one of {', '.join(BPE_ENCODERS)}"
        )
    if mode == "tokenizers":
        log.info("encoding with tokenizers: data.bpe_encoder=tokenizers")
        return None
    try:
        enc = to_tiktoken(tok, name)
        docs = sample(texts)
        bad = first_mismatch(tok, enc, docs)
        if bad is not None:
            raise NotConvertible(
                f"tiktoken's ids differ from tokenizers' on sample text {bad[0]} ({bad[1][:60]!r}...)"
            )
    except NotConvertible as e:
        if mode == "tiktoken":
            raise ValueError(
                f"data.bpe_encoder=tiktoken: this tokenizer cannot be encoded by tiktoken: {e}"
            ) from None
        log.info("encoding with tokenizers, not tiktoken: %s", e)
        return None
    n_bytes = sum(len(t.encode("utf-8")) for t in docs)
    log.info(
        "encoding with tiktoken: ids identical to tokenizers' on %d sample texts (%d bytes)",
        len(docs),
        n_bytes,
    )
    return enc
