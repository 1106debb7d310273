"""evaluate.py: loss, perplexity and bits per byte agree with each other and with a direct computation."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from gptlab.checkpoints import load_gpt
from gptlab.data.config import DataConfig
from gptlab.data.datamodule import TokenDataModule
from gptlab.data.packing import prepare_tokens
from gptlab.data.spec import tokenizer_spec
from gptlab.data.tokenizers import BPETokenizer
from gptlab.model import GPTConfig
from tests.interop.helpers import TINY, load_cli, perturbed_gpt

EVALUATE = load_cli("evaluate.py")
MAX_BYTES = 120_000
CORPUS = [
    "def add(a, b):\n    return a + b\n",
    "class Stack:\n    def push(self, item):\n        self.items.append(item)\n",
    "import os\nfor name in sorted(os.listdir('.')):\n    print(name)\n",
] * 20


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One token cache for the module: the corpus is packed once."""
    return tmp_path_factory.mktemp("token-cache")


def run(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, float]:
    """evaluate.py in-process; the metrics it printed."""
    capsys.readouterr()
    assert EVALUATE.main(list(args)) == 0
    out = capsys.readouterr().out
    values = {
        name: float(m.group(1))
        for name in ("loss", "ppl", "bpb")
        if (m := re.search(rf"^{name}\s+([0-9.eE+-]+)", out, re.M))
    }
    m = re.search(r"([0-9.]+) bytes/token", out)
    assert m and len(values) == 3, out
    values["bytes_per_token"] = float(m.group(1))
    values["tokens"] = float(re.search(r"= (\d+) tokens", out).group(1))  # type: ignore[union-attr]
    return values


def direct_loss(ckpt: Path, tokens: np.ndarray, ids: list[int]) -> float:
    """Mean token cross-entropy of windows `ids` (block_size+1 tokens each), read from the file."""
    bs = TINY["block_size"]
    flat = torch.from_numpy(np.asarray(tokens, dtype=np.int64))
    windows = torch.stack([flat[k * bs : (k + 1) * bs + 1] for k in ids])
    with torch.no_grad():
        logits = load_gpt(ckpt)(windows[:, :-1])
    return F.cross_entropy(logits.flatten(0, 1), windows[:, 1:].flatten()).item()


def test_metrics_agree_with_each_other_and_a_direct_computation(capsys, byte_ckpt: Path, cache: Path) -> None:
    data = [f"data.cache_dir={cache}", f"data.max_bytes={MAX_BYTES}"]
    got = run(capsys, f"ckpt_path={byte_ckpt}", *data, "batch_size=3", "data.val_windows=0")
    assert got["ppl"] == pytest.approx(math.exp(got["loss"]), rel=1e-5)
    assert got["bpb"] == pytest.approx(got["loss"] / math.log(2) / got["bytes_per_token"], rel=1e-5)
    packed = prepare_tokens(DataConfig(max_bytes=MAX_BYTES, cache_dir=str(cache)))
    assert got["bytes_per_token"] == pytest.approx(packed.meta["bytes_per_token"], abs=1e-4)
    # data.val_windows=0: every val window of block_size+1 tokens, read straight from the token file
    bs = TINY["block_size"]
    tokens = packed.tokens("val")
    n = (len(tokens) - 1) // bs
    assert got["tokens"] == n * bs
    assert got["loss"] == pytest.approx(direct_loss(byte_ckpt, tokens, list(range(n))), abs=2e-6)


def test_the_scored_windows_are_the_runs_validation_subset(capsys, byte_ckpt: Path, cache: Path) -> None:
    """data.val_windows=12: the 12 windows the training run's val loader reads, whatever batch_size."""
    data = [f"data.cache_dir={cache}", f"data.max_bytes={MAX_BYTES}", "data.val_windows=12"]
    got = run(capsys, f"ckpt_path={byte_ckpt}", *data, "batch_size=5")
    cfg = DataConfig(max_bytes=MAX_BYTES, cache_dir=str(cache), val_windows=12)
    dm = TokenDataModule(cfg, block_size=TINY["block_size"], seed=0)
    ids = dm.subset("val")
    assert len(ids) == 12 and ids != list(range(12))
    assert got["tokens"] == 12 * TINY["block_size"]
    assert got["loss"] == pytest.approx(direct_loss(byte_ckpt, dm.prepare().tokens("val"), ids), abs=2e-6)
    assert run(capsys, f"ckpt_path={byte_ckpt}", *data, "batch_size=1")["loss"] == pytest.approx(
        got["loss"], abs=1e-6
    )


def test_val_windows_beyond_the_split_is_one_line(capsys, byte_ckpt: Path, cache: Path) -> None:
    data = [f"data.cache_dir={cache}", f"data.max_bytes={MAX_BYTES}", "data.val_windows=100000"]
    with pytest.raises(SystemExit) as exit_info:
        EVALUATE.main([f"ckpt_path={byte_ckpt}", *data])
    assert exit_info.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and re.fullmatch(
        r"error: data\.val_windows=100000 but the val split has only (\d+) windows of block_size=64 "
        r"tokens; accepted: 0 \(all \1\) to \1",
        lines[0],
    ), lines


def test_the_checkpoints_tokenizer_is_used_whatever_the_data_config_says(
    capsys, cache: Path, tmp_path: Path
) -> None:
    bpe = BPETokenizer.train(CORPUS, 300)
    model = perturbed_gpt({"vocab_size": 300})
    ckpt = tmp_path / "bpe.pt"
    cfg: GPTConfig = model.cfg
    spec = tokenizer_spec(bpe)
    torch.save({"model_config": cfg.to_dict(), "state_dict": model.state_dict(), "tokenizer": spec}, ckpt)
    bpe.save(tmp_path / "tok")
    data = [f"data.cache_dir={cache}", f"data.max_bytes={MAX_BYTES}", "data.val_windows=4", "batch_size=2"]
    implicit = run(capsys, f"ckpt_path={ckpt}", *data)  # data.tokenizer=byte in the config
    explicit = run(
        capsys,
        f"ckpt_path={ckpt}",
        *data,
        "data.tokenizer=pretrained",
        f"data.tokenizer_path={tmp_path / 'tok'}",
    )
    assert implicit["bytes_per_token"] > 1.1  # BPE tokens (bytes would give exactly 1.0)
    assert implicit == explicit
    assert implicit["bpb"] == pytest.approx(
        implicit["loss"] / math.log(2) / implicit["bytes_per_token"], rel=1e-4
    )


def test_a_bpe_run_is_evaluated_on_its_cached_tokens(capsys, tmp_path: Path) -> None:
    """The data config's BPE is the checkpoint's: its packed tokens are reused, not re-tokenized."""
    cache = tmp_path / "cache"
    data_cfg = DataConfig(tokenizer="bpe", bpe_vocab_size=320, max_bytes=MAX_BYTES, cache_dir=str(cache))
    packed = prepare_tokens(data_cfg)  # what the training run packed
    model = perturbed_gpt({"vocab_size": packed.tokenizer.vocab_size})
    spec = tokenizer_spec(packed.tokenizer)
    ckpt = tmp_path / "bpe.pt"
    torch.save(
        {"model_config": model.cfg.to_dict(), "state_dict": model.state_dict(), "tokenizer": spec}, ckpt
    )
    data = [f"data.cache_dir={cache}", f"data.max_bytes={MAX_BYTES}", "data.tokenizer=bpe"]
    got = run(capsys, f"ckpt_path={ckpt}", *data, "data.bpe_vocab_size=320", "data.val_windows=16")
    assert got["bytes_per_token"] == pytest.approx(packed.meta["bytes_per_token"], abs=1e-4)
    assert not list((cache / "tokenizers").glob("checkpoint-*"))  # no re-tokenization happened


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ([], "ckpt_path is required"),
        (["ckpt_path=x.ckpt", "split=test"], "split='test' is not accepted"),
        (["ckpt_path=x.ckpt", "batch_size=0"], "batch_size=0 must be a positive integer"),
        (["ckpt_path=x.ckpt", "max_batches=4"], "max_batches=4 was replaced by data.val_windows=<windows>"),
        (["ckpt_path=x.ckpt", "model.n_layer=2"], "unknown argument 'model.n_layer'"),
        (["ckpt_path=x.ckpt", "data=nope"], "Could not find 'data/nope'"),
        (["ckpt_path=nowhere.ckpt"], "ckpt_path='nowhere.ckpt' does not exist"),
    ],
)
def test_errors_are_one_line_and_exit_2(capsys, args: list[str], expected: str) -> None:
    with pytest.raises(SystemExit) as exit_info:
        EVALUATE.main(args)
    assert exit_info.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0], lines
