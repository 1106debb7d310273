"""Issue 23, item 1: a byte-level BPE encoded through tiktoken gives tokenizers' ids, and the packed
cache does not depend on which encoder ran.

The oracle is `tokenizers`' own encode (another library's code) and, for packing, the bytes the
`tokenizers` path wrote (data.bpe_encoder=tokenizers).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import tiktoken
import tokenizers
from tokenizers import decoders, models, normalizers, pre_tokenizers

from gptlab.data.config import DataConfig
from gptlab.data.packing import prepare_tokens
from gptlab.data.tokenizers import EOT, BPETokenizer, PretrainedTokenizer, bytes_to_unicode
from gptlab.data.tokenizers.tiktoken_bpe import PROBES, checked_encoding, first_mismatch, to_tiktoken

WORDS = "the a cat sat on mat ünïcödé Köln 日本語 🙂 naïve 3.14 2026 1,000 it's we'll".split()


def corpus(n: int, seed: int = 0) -> list[str]:
    """Documents of words, digits, unicode and whitespace runs (tabs, blank lines, spaces)."""
    rng = np.random.default_rng(seed)
    seps = [" ", " ", " ", "  ", "\t", "\n", "\n\n", "   ", " \n "]
    docs = []
    for _ in range(n):
        k = int(rng.integers(5, 60))
        words = [WORDS[i] for i in rng.integers(0, len(WORDS), k)]
        seq = [str(int(rng.integers(0, 10**6))) if rng.random() < 0.1 else w for w in words]
        docs.append("".join(w + seps[int(rng.integers(0, len(seps)))] for w in seq))
    return docs


@pytest.fixture(scope="module")
def bpe() -> BPETokenizer:
    return BPETokenizer.train(corpus(400), vocab_size=600)


def test_converted_bpe_encodes_tokenizers_ids(bpe: BPETokenizer) -> None:
    held_out = corpus(200, seed=1) + [f"one{EOT}two {EOT} three", *PROBES, " " * 17, "\n" * 9 + "x"]
    oracle = [bpe.tok.encode(t, add_special_tokens=False).ids for t in held_out]  # tokenizers itself
    assert bpe.use_tiktoken(corpus(50, seed=2))  # tiktoken is the encoder from now on
    assert bpe.fast is not None and bpe.fast.n_vocab == bpe.vocab_size
    assert bpe.encode_batch(held_out) == oracle
    assert [bpe.encode(t) for t in held_out] == oracle
    assert bpe.encode(f"a{EOT}b").count(bpe.eos_id) == 0  # written in a text, it is text
    assert bpe.decode(bpe.encode(held_out[0])) == held_out[0]


def _abc_tokenizer() -> tokenizers.Tokenizer:
    """A BPE tiktoken cannot copy: 'abc' is made from 'ab'+'c', but 'b'+'c' merges first, so
    tokenizers leaves 'a','bc' while tiktoken merges those into 'abc' (it knows no merge rules)."""
    vocab = {ch: b for b, ch in bytes_to_unicode().items()}
    vocab.update(bc=256, ab=257, abc=258)
    tok = tokenizers.Tokenizer(models.BPE(vocab=vocab, merges=[("b", "c"), ("a", "b"), ("ab", "c")]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    return tok


def test_ids_that_differ_on_the_sample_fall_back(caplog: pytest.LogCaptureFixture) -> None:
    tok = _abc_tokenizer()
    enc = to_tiktoken(tok)  # the file alone looks convertible ...
    assert enc.encode("abc") != tok.encode("abc").ids  # ... but the ids differ
    with caplog.at_level(logging.INFO, logger="gptlab.data.tokenizers.tiktoken_bpe"):
        assert checked_encoding(tok, ["x abc y"]) is None
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and "encoding with tokenizers" in lines[0] and "differ" in lines[0], lines
    with pytest.raises(ValueError, match="data.bpe_encoder=tiktoken: .*differ"):
        checked_encoding(tok, ["x abc y"], mode="tiktoken")


def _llo_tokenizer() -> tokenizers.Tokenizer:
    """_abc_tokenizer's trap on 'llo' (in the probe 'Hello, world! ...'): 'l'+'o' merges first, so
    tokenizers leaves 'l','lo' where tiktoken merges them into 'llo'."""
    vocab = {ch: b for b, ch in bytes_to_unicode().items()}
    vocab.update(lo=256, ll=257, llo=258)
    tok = tokenizers.Tokenizer(models.BPE(vocab=vocab, merges=[("l", "o"), ("l", "l"), ("ll", "o")]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    return tok


def test_a_difference_only_on_a_probe_string_falls_back(caplog: pytest.LogCaptureFixture) -> None:
    """Issue 48 §6: the corpus sample agrees, a probe string does not: the check still refuses
    tiktoken, naming the probe. Oracle: both libraries' own encoders, run here on each text."""
    tok = _llo_tokenizer()
    enc = to_tiktoken(tok)
    corpus_sample = ["the cat sat on the mat", "a dog, 42 times\n\tover"]

    def agree(text: str) -> bool:
        return enc.encode_ordinary(text) == tok.encode(text, add_special_tokens=False).ids

    assert all(agree(t) for t in corpus_sample)  # the corpus alone would let tiktoken through
    differing = [p for p in PROBES if not agree(p)]
    assert differing and differing[0].startswith("Hello")
    with caplog.at_level(logging.INFO, logger="gptlab.data.tokenizers.tiktoken_bpe"):
        assert checked_encoding(tok, corpus_sample) is None
    (line,) = [r.getMessage() for r in caplog.records]
    assert line.startswith("encoding with tokenizers") and repr(differing[0][:60]) in line, line
    with pytest.raises(ValueError, match="data.bpe_encoder=tiktoken: .*differ"):
        checked_encoding(tok, corpus_sample, mode="tiktoken")


def test_the_check_compares_ids_not_lengths(bpe: BPETokenizer) -> None:
    """Issue 37 §6: an Encoding whose ids differ from tokenizers' at equal lengths (the bytes 'x' and
    'q' trade ids; single bytes are never merge results, so every split keeps its length) is caught."""
    enc = to_tiktoken(bpe.tok)
    ranks = dict(enc._mergeable_ranks)
    ranks[b"x"], ranks[b"q"] = ranks[b"q"], ranks[b"x"]
    swapped = tiktoken.Encoding("swapped", pat_str=enc._pat_str, mergeable_ranks=ranks,
                                special_tokens=enc._special_tokens)  # fmt: skip
    texts = ["the cat sat", "a fox quit 42", "more"]
    oracle = [bpe.tok.encode(t, add_special_tokens=False).ids for t in texts]  # tokenizers itself
    got = [swapped.encode_ordinary(t) for t in texts]
    assert [len(g) for g in got] == [len(o) for o in oracle] and got[1] != oracle[1]
    assert first_mismatch(bpe.tok, swapped, texts) == (1, texts[1])
    assert first_mismatch(bpe.tok, enc, texts) is None


def test_unconvertible_tokenizers_fall_back_with_the_reason(
    bpe: BPETokenizer, caplog: pytest.LogCaptureFixture
) -> None:
    spec = json.loads(bpe.tok.to_str())
    lowered = tokenizers.Tokenizer.from_str(bpe.tok.to_str())
    lowered.normalizer = normalizers.Lowercase()
    prefixed = tokenizers.Tokenizer.from_str(bpe.tok.to_str())
    prefixed.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    stripped = json.loads(json.dumps(spec))
    stripped["added_tokens"][0]["lstrip"] = True
    cases = {
        "normalizer": lowered,
        "prefix space": prefixed,
        "lstrip": tokenizers.Tokenizer.from_str(json.dumps(stripped)),
        "not BPE": tokenizers.Tokenizer(models.WordLevel({"a": 0, "[UNK]": 1}, unk_token="[UNK]")),
    }
    for why, tok in cases.items():
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="gptlab.data.tokenizers.tiktoken_bpe"):
            assert checked_encoding(tok, ["some text"]) is None, why
        assert [r.getMessage() for r in caplog.records] == [caplog.records[0].getMessage()], why
        assert why.split()[-1] in caplog.records[0].getMessage(), (why, caplog.records[0].getMessage())
    assert checked_encoding(bpe.tok, ["x"], mode="tokenizers") is None


def _pack(make_cfg: Callable[..., DataConfig], tmp: Path, encoder: str, **kw: object) -> tuple[dict, bytes]:
    packed = prepare_tokens(make_cfg(cache_dir=str(tmp / encoder), bpe_encoder=encoder, **kw))
    files = b"".join(packed.path(s).read_bytes() for s in ("train", "val"))
    return packed.meta, files


@pytest.mark.parametrize("kind", ["bpe-stream", "pretrained-dataset"])
def test_packed_cache_is_the_same_whichever_encoder_ran(
    kind: str, bpe: BPETokenizer, make_cfg: Callable[..., DataConfig], tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    docs = corpus(300, seed=3)
    if kind == "bpe-stream":  # trained by gptlab, the text file streamed at the separator
        (tmp_path / "c.txt").write_text(EOT.join(docs))
        kw: dict = dict(source="text", path=str(tmp_path / "c.txt"), doc_separator=EOT, tokenizer="bpe",
                        bpe_vocab_size=500)  # fmt: skip
    else:  # a tokenizer.json loaded, the documents read as a dataset (one of them holds the separator)
        docs[7] = f"before{EOT}after"
        (tmp_path / "c.jsonl").write_text("".join(json.dumps({"text": d}) + "\n" for d in docs))
        bpe.save(tmp_path / "tok")
        kw = dict(source="json", path=str(tmp_path / "c.jsonl"), tokenizer="pretrained",
                  tokenizer_path=str(tmp_path / "tok"))  # fmt: skip
    with caplog.at_level(logging.INFO, logger="gptlab.data.tokenizers.tiktoken_bpe"):
        fast_meta, fast = _pack(make_cfg, tmp_path, "tiktoken", **kw)
        slow_meta, slow = _pack(make_cfg, tmp_path, "tokenizers", **kw)
    said = [r.getMessage() for r in caplog.records]
    assert said[0].startswith("encoding with tiktoken") and "tokenizers" in said[-1], said
    assert fast_meta["fingerprint"] == slow_meta["fingerprint"]
    assert fast_meta["files"] == slow_meta["files"] and fast == slow
    assert len(fast) > 1000


def test_gpt2_style_tokenizer_json_converts(bpe: BPETokenizer, tmp_path: Path) -> None:
    """A tokenizer.json written in the older 'a b' merges format (GPT-2's) converts too."""
    spec = json.loads(bpe.tok.to_str())
    spec["model"]["merges"] = [" ".join(m) for m in spec["model"]["merges"]]
    (tmp_path / "tokenizer.json").write_text(json.dumps(spec))
    tok = PretrainedTokenizer(tmp_path)
    texts = corpus(40, seed=4)
    assert tok.use_tiktoken(texts)
    assert tok.encode_batch(texts) == [bpe.tok.encode(t).ids for t in texts]


def test_rustbpe_trainer_packs_rustbpes_own_ids(
    make_cfg: Callable[..., DataConfig], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """data.bpe_trainer=rustbpe (issue 23, item 4): the oracle is rustbpe's own encoder, trained on
    the same train documents; its ids differ from tokenizers' trainer, so its cache key does too."""
    rustbpe = pytest.importorskip("rustbpe")
    from tiktoken_ext.openai_public import r50k_pat_str

    from gptlab.data.resolve import resolve

    docs = corpus(300, seed=5)
    (tmp_path / "c.txt").write_text(EOT.join(docs))
    kw = dict(
        source="text", path=str(tmp_path / "c.txt"), doc_separator=EOT, tokenizer="bpe", bpe_vocab_size=400
    )
    with caplog.at_level(logging.INFO, logger="gptlab.data.tokenizers.tiktoken_bpe"):
        packed = prepare_tokens(make_cfg(bpe_trainer="rustbpe", **kw))
    assert any(r.getMessage().startswith("encoding with tiktoken") for r in caplog.records)
    assert packed.meta["fingerprint"] != resolve(make_cfg(**kw)).key
    oracle = rustbpe.Tokenizer()  # document i is val iff i % 20 == 0 (data.val_fraction=0.05)
    oracle.train_from_iterator(iter([d for i, d in enumerate(docs) if i % 20]), 399, pattern=r50k_pat_str)
    eos = packed.meta["eos_id"]
    assert eos == packed.meta["vocab_size"] - 1 == oracle.vocab_size
    for split, side in (("val", 0), ("train", 1)):
        expected = [t for i, d in enumerate(docs) if bool(i % 20) == side for t in [*oracle.encode(d), eos]]
        assert packed.tokens(split).tolist() == expected, split
