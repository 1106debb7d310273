"""The vocabulary a planned run's embedding and head will have, read from the data config.

train.py grows model.vocab_size to the data's tokenizer (training.app.model_config), so a plan
that took model.vocab_size alone would size the logits of `data.tokenizer=bpe
data.bpe_vocab_size=32768` at the model preset's vocabulary (256 for the byte-level presets): at 2k
context the logits are most of a small model's activation memory. Here the tokenizer's size comes
from the config and the files it names (a tokenizer.json, a .tiktoken file or tiktoken's cache; for
pre-tokenized shards, data.vocab_size or data.tokenizer_path); no corpus is read and nothing is
trained. Where train.py would fail to get a tokenizer (a missing file, an encoding tiktoken cannot
load), the planner fails with its error.
"""

from __future__ import annotations

from gptlab.data.config import DataConfig


def data_vocab(data: DataConfig) -> tuple[int, str]:
    """(ids the data's tokenizer gives the model, where that number comes from)."""
    from gptlab.data import tokenizers
    from gptlab.data.resolve import check_tokenizer_settings

    if data.source == "tokens":  # shards read in place: their own tokenizer rules (data.shards)
        from gptlab.data.shards import shard_tokenizer

        bad_vocab = data.vocab_size is not None and data.vocab_size < 1  # refused first, as train.py does
        file = (
            tokenizers.pretrained_file(data.tokenizer_path) if data.tokenizer_path and not bad_vocab else None
        )
        tok, bound, what = shard_tokenizer(data.vocab_size, data.tokenizer_path, file)
        return max(bound, tok.vocab_size), what
    check_tokenizer_settings(data)  # what train.py refuses, refused here in its words
    if data.tokenizer == "byte":
        return tokenizers.ByteTokenizer.vocab_size, "data.tokenizer=byte"
    if data.tokenizer == "bpe":
        # the most a BPE trains to (a corpus with too few merges stops short: the plan is an upper bound)
        return data.bpe_vocab_size, f"data.tokenizer=bpe data.bpe_vocab_size={data.bpe_vocab_size}"
    if data.tokenizer == "tiktoken":
        from gptlab.data.tokenizers.tiktoken_encodings import TiktokenTokenizer

        tt = TiktokenTokenizer.from_setting(data.tiktoken_encoding)
        return tt.vocab_size, f"data.tiktoken_encoding={data.tiktoken_encoding} ({tt.n_ids} ids, padded)"
    if not data.tokenizer_path:  # data.tokenizer=pretrained
        raise ValueError(
            "data.tokenizer=pretrained needs data.tokenizer_path (a tokenizer.json or its directory)"
        )
    size = tokenizers.PretrainedTokenizer(tokenizers.pretrained_file(data.tokenizer_path)).vocab_size
    return size, f"data.tokenizer_path={data.tokenizer_path}"


def planned_vocab(model_vocab: int, data: DataConfig) -> tuple[int, str]:
    """model.vocab_size grown to the tokenizer's, as train.py grows it (never shrunk)."""
    ids, what = data_vocab(data)
    if ids > model_vocab:
        return ids, f"{what}; model.vocab_size={model_vocab} grown to fit, as train.py does"
    return model_vocab, f"model.vocab_size={model_vocab} (the tokenizer needs {ids}: {what})"
