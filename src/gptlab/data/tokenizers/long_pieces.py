"""BPE training input with every pre-token at most MAX_PIECE_CHARS characters long.

`tokenizers`' BpeTrainer is quadratic in the length of one pre-token (a 100k-character run of one
letter takes ~7 CPU-s; 200k did not finish in 7 minutes), and real corpora hold such runs: rows of
dashes or `=`, whitespace padding, letter runs in generated or genomic text. Both trainers therefore
train on the documents cut inside each GPT-2 pre-token longer than MAX_PIECE_CHARS, every
MAX_PIECE_CHARS characters, the pieces handed over as separate texts. Nothing else changes:

- a pre-token of at most MAX_PIECE_CHARS characters reaches the trainer as it is, with its count, so a
  corpus without longer ones learns exactly the merges it learned before, and a longer run changes
  only the counts of the pairs inside it (the pair across each cut is lost, and a run's chunks are
  counted as words of their own);
- no token longer than MAX_PIECE_CHARS characters can be learned, far above any a vocabulary of tens
  of thousands of ids holds;
- encoding is untouched: both `tokenizers` and tiktoken split text with GPT-2's pattern and merge
  inside each whole pre-token, so their ids stay equal (the BPE's tiktoken check still decides).

The cut is on the training side only, and only pre-tokens are cut (a minified file's long runs of
short pre-tokens are not). Finding the pieces costs one translate of each document's bytes; only a
document holding a run of MAX_PIECE_CHARS non-space or whitespace characters is pre-tokenized here.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import pairwise

from tokenizers import Regex, pre_tokenizers

from gptlab.data.tokenizers.tiktoken_bpe import GPT2_PATTERN

# A few hundred characters: real words, numbers and symbol groups are far shorter, so only runs are
# cut; a chunk that long still costs the trainer little (docs/data.md, docs/performance.md)
MAX_PIECE_CHARS = 256

# \s in ASCII, for the Oniguruma pattern that cuts (tokenizers') and rustbpe's: \x1c-\x1f are not in it
_ASCII_SPACE = b" \t\n\v\f\r"
# bytes -> b"a" or b" ", erring towards a longer run: a non-space character has no byte in _ASCII_SPACE
# (a run of N is N or more b"a" under _NON_SPACE), a whitespace one only bytes in _ASCII_SPACE or
# >= 0x80 (N or more b" " under _SPACE); on ASCII text the two tables agree
_NON_SPACE = bytes(0x20 if b in _ASCII_SPACE else 0x61 for b in range(256))
_SPACE = bytes(0x20 if b in _ASCII_SPACE or b >= 0x80 else 0x61 for b in range(256))
_SPLIT = pre_tokenizers.Split(Regex(GPT2_PATTERN), behavior="isolated")


def may_hold_long_piece(text: str, max_chars: int = MAX_PIECE_CHARS) -> bool:
    """False when no GPT-2 pre-token of `text` can be longer than max_chars characters: such a
    pre-token is a space and max_chars non-space characters or more, or max_chars + 1 whitespace ones."""
    if len(text) <= max_chars:
        return False
    raw = text.encode("utf-8", errors="surrogatepass")
    marks = raw.translate(_NON_SPACE)
    if b"a" * max_chars in marks:
        return True
    if not text.isascii():
        marks = raw.translate(_SPACE)
    return b" " * (max_chars + 1) in marks


def cut_long_pieces(text: str, max_chars: int = MAX_PIECE_CHARS) -> list[str]:
    """`text` cut inside each GPT-2 pre-token longer than max_chars, every max_chars characters."""
    cuts = [
        cut
        for _, (start, end) in _SPLIT.pre_tokenize_str(text)
        if end - start > max_chars
        for cut in range(start + max_chars, end, max_chars)
    ]
    return [text[a:b] for a, b in pairwise([0, *cuts, len(text)])]


def bounded_texts(texts: Iterable[str], max_chars: int | None = MAX_PIECE_CHARS) -> Iterator[str]:
    """The texts a BPE trainer reads: each text whole, or its pieces when it holds a pre-token longer
    than max_chars (None: every text whole, the trainers' behaviour before the bound)."""
    for text in texts:
        if max_chars is not None and may_hold_long_piece(text, max_chars):
            yield from cut_long_pieces(text, max_chars)
        else:
            yield text
