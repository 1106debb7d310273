"""The files a user would bring (a text corpus, TinyStories as text and parquet, llm.c token
shards), made small here so the documented data commands run on them."""

from __future__ import annotations

import os
from pathlib import Path

WORDS = "the a little big cat dog sun tree bird ran saw liked happy sad day park friend home ball red".split()


def stories(n: int, seed: int = 0) -> list[str]:
    """TinyStories-shaped documents: a few short sentences of common words."""
    import random

    rng = random.Random(seed)
    out = []
    for k in range(n):
        sentences = [" ".join(rng.choices(WORDS, k=rng.randint(4, 9))).capitalize() + "." for _ in range(4)]
        out.append(f"Story {k}. " + " ".join(sentences))
    return out


def text_corpus(root: Path) -> Path:
    """corpus/*.txt: 30 files of the interpreter's own sources (the val split takes every 20th)."""
    corpus = root / "corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    sources = sorted(Path(os.__file__).parent.glob("[a-t]*.py"))[:30]
    for k, src in enumerate(sources):
        (corpus / f"{k:02d}.txt").write_text(src.read_text(errors="replace")[:6000])
    return root


def tinystories_txt(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "TinyStories-train.txt").write_text("\n<|endoftext|>\n".join(stories(400)))
    return root


def tinystories_parquet(root: Path) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    data = root / "TinyStories" / "data"
    data.mkdir(parents=True, exist_ok=True)
    docs = stories(400, seed=1)
    for k in range(2):
        pq.write_table(pa.table({"text": docs[k::2]}), data / f"train-{k:05d}-of-00002.parquet")
    return root


def fineweb_shards(root: Path) -> Path:
    """fineweb10B/fineweb_{train,val}_*.bin with llm.c headers, and gpt2/tokenizer.json (a small
    byte-level BPE standing in for GPT-2's, which needs the hub) whose ids the shards hold."""
    import numpy as np
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    docs = stories(300, seed=2)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<|endoftext|>"])
    tok.train_from_iterator(docs, trainer)
    (root / "gpt2").mkdir(parents=True, exist_ok=True)
    tok.save(str(root / "gpt2" / "tokenizer.json"))
    eot = tok.token_to_id("<|endoftext|>")
    ids = [i for d in docs for i in [eot, *tok.encode(d).ids]]
    shards = root / "fineweb10B"
    shards.mkdir(exist_ok=True)
    cut = [0, len(ids) * 9 // 20, len(ids) * 18 // 20, len(ids)]
    for name, (a, b) in zip(
        ("train_000001", "train_000002", "val_000000"), zip(cut, cut[1:], strict=False), strict=True
    ):
        header = np.zeros(256, dtype="<i4")
        header[:3] = [20240520, 1, b - a]
        with open(shards / f"fineweb_{name}.bin", "wb") as fh:
            fh.write(header.tobytes())
            fh.write(np.asarray(ids[a:b], dtype="<u2").tobytes())
    return root
