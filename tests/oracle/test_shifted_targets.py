"""The training target is the NEXT token: a model trained on the current token must fail here.

Corpus: token t+1 = f(token t) for a fixed random derangement f of a small vocabulary, each sequence
started at a random token. Next-token prediction is deterministic (loss → 0); a model trained on
"target = current token" learns the identity, which on the next-token objective is worse than
chance (f has no fixed points). The real path trains (GPTLightningModule + a Lightning Trainer, the
module's own AdamW and schedule); the objective is measured here with plain F.cross_entropy on
logits[:, :-1] against tokens[:, 1:].

Data side: TokenWindows windows of a packed token file, read against the file itself through
np.memmap: window k is tokens[k·T : k·T + T + 1], so x = w[:-1] and y = w[1:] is the next token.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import lightning as L
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader

from gptlab.config import OptimConfig
from gptlab.data.config import DataConfig
from gptlab.data.datamodule import TokenDataModule, TokenWindows
from gptlab.model import GPTConfig
from gptlab.training.module import GPTLightningModule

V, T, BATCH, STEPS = 16, 16, 16, 60


def derangement(n: int, gen: torch.Generator) -> torch.Tensor:
    """A uniformly random permutation with no fixed point (rejection sampling)."""
    while True:
        p = torch.randperm(n, generator=gen)
        if not torch.any(p == torch.arange(n)):
            return p


def chains(f: torch.Tensor, n: int, length: int, gen: torch.Generator) -> torch.Tensor:
    """(n, length) sequences with seq[:, t+1] = f[seq[:, t]], random starts."""
    seq = torch.empty(n, length, dtype=torch.long)
    seq[:, 0] = torch.randint(0, len(f), (n,), generator=gen)
    for t in range(1, length):
        seq[:, t] = f[seq[:, t - 1]]
    return seq


def next_token_loss(model: torch.nn.Module, tokens: torch.Tensor) -> float:
    """The objective, written here: logits at position t scored against the token at t+1."""
    with torch.no_grad():
        logits = model(tokens)
    return float(F.cross_entropy(logits[:, :-1].reshape(-1, V).double(), tokens[:, 1:].reshape(-1)))


def test_training_learns_the_next_token_not_the_current_one(tmp_path: Path) -> None:
    gen = torch.Generator().manual_seed(0)
    f = derangement(V, gen)
    train = chains(f, STEPS * BATCH, T + 1, gen)  # windows of block_size + 1, as the data module gives
    held_out = chains(f, 64, T, gen)

    L.seed_everything(0, verbose=False)
    cfg = GPTConfig(vocab_size=V, block_size=T, n_layer=1, n_head=2, n_embd=32)
    optim = OptimConfig(lr=1e-2, min_lr=1e-3, warmup_steps=5, grad_clip=1.0)
    module = GPTLightningModule(model=dataclasses.asdict(cfg), optim=dataclasses.asdict(optim))
    before = next_token_loss(module.model.eval(), held_out)
    module.model.train()
    trainer = L.Trainer(
        accelerator="cpu",
        devices=1,
        max_steps=STEPS,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        limit_val_batches=0,
        num_sanity_val_steps=0,
        default_root_dir=str(tmp_path),
    )
    trainer.fit(module, train_dataloaders=DataLoader(list(train), batch_size=BATCH))
    assert trainer.global_step == STEPS
    module.model.eval()
    after = next_token_loss(module.model, held_out)
    chance = math.log(V)
    assert before > 0.8 * chance, before  # untrained: about chance
    assert after < 0.3 * chance, (before, after, chance)
    print(f"next-token loss {before:.3f} -> {after:.3f} (ln V = {chance:.3f})")


def test_windows_hold_the_next_token_of_the_packed_file(tmp_path: Path) -> None:
    """Byte-tokenized text: the file is the documents' UTF-8 bytes; windows stride block_size with
    one token of overlap, and the module's loss is the CE against the file's next tokens."""
    docs = [f"document {i}: " + "".join(chr(97 + (i * 7 + j * j) % 26) for j in range(150)) for i in range(8)]
    src = tmp_path / "corpus"
    src.mkdir()
    for i, d in enumerate(docs):
        (src / f"d{i}.txt").write_text(d, encoding="utf-8")
    cfg = DataConfig(
        source="text",
        path=str(src / "*.txt"),
        tokenizer="byte",
        val_fraction=0.25,
        batch_size=4,
        num_proc=1,
        cache_dir=str(tmp_path / "cache"),
    )
    block = 32
    dm = TokenDataModule(cfg, block_size=block, seed=0)
    packed = dm.prepare()

    # the token files read directly: every document's bytes then the byte tokenizer's end-of-text id
    # (0xFF, a byte UTF-8 never uses), whole and in order, in one of them
    dtype = np.dtype(json.loads((packed.directory / "meta.json").read_text())["dtype"])
    files = {s: np.memmap(packed.directory / f"{s}.bin", dtype=dtype, mode="r") for s in ("train", "val")}
    pos = {"train": 0, "val": 0}
    for d in docs:
        b = np.frombuffer(d.encode("utf-8") + b"\xff", dtype=np.uint8).astype(dtype)
        where = [s for s in files if np.array_equal(files[s][pos[s] : pos[s] + len(b)], b)]
        assert where, d[:20]
        pos[where[0]] += len(b)
    assert pos == {s: len(files[s]) for s in files}
    assert pos["train"] > 4 * block

    mem = files["train"]
    windows = TokenWindows(packed, "train", block)
    assert len(windows) == (len(mem) - 1) // block
    for k in range(len(windows)):
        w = windows[k]
        x, y = w[:-1], w[1:]
        assert np.array_equal(x, mem[k * block : (k + 1) * block]), k
        assert np.array_equal(y, mem[k * block + 1 : (k + 1) * block + 1]), k  # the NEXT token

    # the module's loss on a loader batch is the CE against those next tokens, from the file
    torch.manual_seed(0)
    mcfg = GPTConfig(vocab_size=256, block_size=block, n_layer=1, n_head=2, n_embd=32)
    module = GPTLightningModule(model=dataclasses.asdict(mcfg), optim=dataclasses.asdict(OptimConfig()))
    batch = next(iter(dm.train_dataloader()))
    assert batch.shape == (cfg.batch_size, block + 1)
    starts = []
    for row in batch:
        k = [j for j in range(len(windows)) if np.array_equal(windows[j], row.numpy())]
        assert k, "a batch row is not a window of the file"
        starts.append(k[0] * block)
    x = torch.stack([torch.from_numpy(mem[s : s + block].astype(np.int64)) for s in starts])
    y = torch.stack([torch.from_numpy(mem[s + 1 : s + block + 1].astype(np.int64)) for s in starts])
    with torch.no_grad():
        want = F.cross_entropy(module.model(x).reshape(-1, 256), y.reshape(-1))
        got = module._loss(batch)
    assert float(got) == pytest.approx(float(want), rel=1e-6)
