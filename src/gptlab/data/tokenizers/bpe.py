"""data.tokenizer=bpe: a byte-level BPE trained on the train documents (by `tokenizers` or rustbpe),
on a sample of at most data.bpe_train_bytes, and cached by its identity so it trains once."""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import tiktoken
import tokenizers
from tokenizers import decoders, models, pre_tokenizers, trainers

from gptlab.data.plan import TokenizerPlan
from gptlab.data.tokenizer_files import TOKENIZER_FILE
from gptlab.data.tokenizers.base import EOT
from gptlab.data.tokenizers.hf import HFTokenizer
from gptlab.data.tokenizers.long_pieces import MAX_PIECE_CHARS, bounded_texts
from gptlab.data.tokenizers.tiktoken_bpe import GPT2_PATTERN
from gptlab.data.tokenizers.tiktoken_encodings import to_hf as tiktoken_to_hf

log = logging.getLogger(__name__)


class BPETokenizer(HFTokenizer):
    """Byte-level BPE trained on the train documents, with <|endoftext|> between documents."""

    @classmethod
    def train(
        cls, texts: Iterable[str], vocab_size: int, max_piece_chars: int | None = MAX_PIECE_CHARS
    ) -> BPETokenizer:
        """Train a byte-level BPE of vocab_size ids (256 bytes + EOS + merges) on the texts cut inside
        pre-tokens longer than max_piece_chars (long_pieces: the trainer is quadratic in them)."""
        tok = tokenizers.Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size,
            special_tokens=[EOT],
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        )
        tok.train_from_iterator(_batched(bounded_texts(texts, max_piece_chars), 256), trainer=trainer)
        return cls(tok, f"bpe{vocab_size}", tok.token_to_id(EOT))

    @classmethod
    def train_rustbpe(
        cls, texts: Iterable[str], vocab_size: int, max_piece_chars: int | None = MAX_PIECE_CHARS
    ) -> BPETokenizer:
        """The same kind of BPE trained by rustbpe: 256 byte ids in byte order, the merges, then
        <|endoftext|> (rustbpe knows no special tokens), written as a plain byte-level tokenizer.json.
        Its texts are cut as `train`'s are, so both trainers learn from the same pieces."""
        try:
            import rustbpe
        except ImportError:
            raise ValueError(
                "data.bpe_trainer=rustbpe needs the rustbpe package (pip install rustbpe)"
            ) from None
        trainer = rustbpe.Tokenizer()
        trainer.train_from_iterator(
            bounded_texts(texts, max_piece_chars), vocab_size - 1, pattern=GPT2_PATTERN
        )
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


def _batched(texts: Iterable[str], n: int) -> Iterator[list[str]]:
    batch: list[str] = []
    for t in texts:
        batch.append(t)
        if len(batch) == n:
            yield batch
            batch = []
    if batch:
        yield batch


@dataclass
class SampleCount:
    """What training_sample read: bytes kept for the BPE, bytes read, and whether every document
    was read (False: it stopped at the budget with documents left unread)."""

    kept: int = 0
    seen: int = 0
    complete: bool = False


def training_sample(
    texts: Iterable[str], budget: int | None, total: int | None, count: SampleCount | None = None
) -> Iterator[str]:
    """At most `budget` UTF-8 bytes of `texts` (whole documents) to train a BPE on.

    When the texts' total size is known they are thinned evenly: a document is kept while the bytes
    kept so far are behind budget/total of the bytes seen, so the sample spans the whole split, not
    its first part (a corpus concatenated source by source would otherwise train on one source).
    Unknown total (a streamed hub set): the first `budget` bytes. Reading stops once it is full.
    `count`, when given, records what was read (sample_line says it)."""
    count = count if count is not None else SampleCount()
    share = 1.0 if budget is None or not total or total <= budget else budget / total
    for text in texts:
        if budget is not None and count.kept >= budget:
            return  # a document is left: the rest is not read
        n = len(text.encode("utf-8"))
        if count.kept <= count.seen * share:
            count.kept += n
            yield text
        count.seen += n
    count.complete = True


def sample_line(count: SampleCount, budget: int | None, total: int | None) -> str:
    """The log line of what the BPE was trained on, in bytes read (not the budget)."""
    limit = f"data.bpe_train_bytes={budget}"
    if count.complete and count.kept == count.seen:
        return f"BPE training sample: all {count.seen} bytes of the train documents ({limit} not reached)"
    if count.complete:
        return (
            f"BPE training sample: {count.kept} of the {count.seen} bytes of the train documents, "
            f"spread over them ({limit})"
        )
    of = f" of {total}" if total else " (the split's size unknown)"
    how = "spread over the first" if total else "the first"
    return (
        f"BPE training sample: {count.kept} bytes, {how} {count.seen} bytes{of} of the train "
        f"documents ({limit}; the rest not read)"
    )


def train_or_reuse(
    plan: TokenizerPlan,
    documents_fn: Callable[[], Iterable[str]],
    train_bytes: Callable[[], int | None] | None = None,
) -> BPETokenizer:
    """The BPE cached at plan.bpe_dir, else one trained on documents_fn's texts and cached there."""
    assert plan.bpe_dir is not None
    file = plan.bpe_dir / TOKENIZER_FILE
    if file.is_file():
        log.info("using cached BPE tokenizer at %s", file)
        return BPETokenizer.from_file(file)
    log.info(
        "training a byte-level BPE with %d ids on the train documents (%s)",
        plan.bpe_vocab_size,
        plan.bpe_trainer,
    )
    train = BPETokenizer.train_rustbpe if plan.bpe_trainer == "rustbpe" else BPETokenizer.train
    budget = plan.bpe_train_bytes
    total = train_bytes() if train_bytes is not None and budget is not None else None  # only when training
    count = SampleCount()
    bpe = train(training_sample(documents_fn(), budget, total, count), plan.bpe_vocab_size)
    if budget is not None:
        log.info("%s", sample_line(count, budget, total))
    if bpe.vocab_size < plan.bpe_vocab_size:
        log.warning(
            "BPE reached only %d of data.bpe_vocab_size=%d ids: the corpus has too few merges",
            bpe.vocab_size,
            plan.bpe_vocab_size,
        )
    plan.bpe_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=plan.bpe_dir, suffix=".tmp")
    os.close(fd)
    bpe.tok.save(tmp)
    os.replace(tmp, file)  # atomic: a concurrent reader sees the whole file or none
    return bpe
