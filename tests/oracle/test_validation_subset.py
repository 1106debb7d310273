"""Validation scores a fixed subset spread over the whole val split, once per window over all ranks.

The oracles are written here: the strata are integer arithmetic on the split's window count; which
windows a loader yielded is read back from the token file (each window's bytes are unique); the
loss is plain F.cross_entropy(reduction="sum") over those windows divided by their token count.
The multi-process agreement (1 process, DDP, FSDP2, evaluate.py) is in
tests/distributed/test_equivalence.py.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace

import lightning as L
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from gptlab.config import OptimConfig
from gptlab.data.config import DataConfig
from gptlab.data.datamodule import TokenDataModule
from gptlab.model import GPTConfig
from gptlab.training.module import GPTLightningModule

BLOCK = 256  # the default model's context: the default corpus's val split has ~3000 windows


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("subset-cache")


def datamodule(cache: Path, rank: int = 0, world: int = 1, **data: object) -> TokenDataModule:
    """The default corpus (data=pystdlib) as a rank of `world` sees it (a stand-in trainer)."""
    cfg = DataConfig(cache_dir=str(cache), num_proc=1, **data)  # type: ignore[arg-type]
    dm = TokenDataModule(cfg, block_size=BLOCK, seed=0)
    dm.trainer = SimpleNamespace(global_rank=rank, world_size=world)  # type: ignore[assignment]
    return dm


def window_rows(dm: TokenDataModule) -> np.ndarray:
    """Every val window, read straight from the token file: row k = tokens[k·T : k·T + T + 1]."""
    tokens = np.asarray(dm.prepare().tokens("val"), dtype=np.int64)
    n = (len(tokens) - 1) // BLOCK
    return np.stack([tokens[k * BLOCK : k * BLOCK + BLOCK + 1] for k in range(n)])


def read_back(dm: TokenDataModule, index: dict[bytes, int]) -> tuple[list[int], list[float], list[int]]:
    """(window indices, weights, each batch's size) of the val loader, windows identified by content."""
    ids: list[int] = []
    weights: list[float] = []
    batches: list[int] = []
    for tokens, weight in dm.val_dataloader():
        batches.append(len(tokens))
        ids += [index[row.numpy().tobytes()] for row in tokens]
        weights += weight.tolist()
    return ids, weights, batches


def test_the_subset_covers_the_whole_split_one_window_per_stratum(cache: Path) -> None:
    dm = datamodule(cache)  # data.val_windows: the schema's default (null: 128, capped by the split)
    rows = window_rows(dm)
    n = len(rows)
    assert dm.cfg.val_windows is None and n > 128, n  # the default's 128 apply here
    count = 128
    index = {row.tobytes(): k for k, row in enumerate(rows)}
    assert len(index) == n, "two val windows hold the same tokens: they could not be told apart"
    ids, weights, _ = read_back(dm, index)
    assert weights == [1.0] * count and len(set(ids)) == count
    for i, k in enumerate(sorted(ids)):  # stratum i is [floor(i·n/N), floor((i+1)·n/N))
        assert i * n // count <= k < (i + 1) * n // count, (i, k)
    assert sorted(ids) != list(range(count)), "the first windows of the split, not a spread"
    assert min(ids) < n // count and max(ids) >= n - n // count
    # fixed: another run seed or a fresh module selects the same windows
    again = TokenDataModule(dm.cfg, block_size=BLOCK, seed=12345)
    assert read_back(again, index)[0] == ids


@pytest.mark.parametrize("count", [128, 125])
def test_every_world_and_batch_size_reads_the_same_windows_once(cache: Path, count: int) -> None:
    rows = window_rows(datamodule(cache))
    index = {row.tobytes(): k for k, row in enumerate(rows)}
    reference: list[int] | None = None
    for world in (1, 2, 3):
        for batch_size in (1, 4, 16):
            real: list[int] = []
            batch_counts, sizes = [], []
            pads = 0
            for rank in range(world):
                dm = datamodule(cache, rank, world, val_windows=count, batch_size=batch_size)
                ids, weights, batches = read_back(dm, index)
                sizes += batches
                assert set(weights) <= {0.0, 1.0}
                real += [k for k, w in zip(ids, weights, strict=True) if w == 1.0]
                pads += weights.count(0.0)
                batch_counts.append(len(batches))
            where = f"world={world} batch_size={batch_size}"
            assert len(set(batch_counts)) == 1, (where, batch_counts)  # FSDP: equal collectives
            per_rank = -(-count // world)
            batches = batch_counts[0]
            assert batches == -(-per_rank // batch_size), where
            # the ranks' padding, plus less than one window a batch to make the batches one size
            # (every batch of one shape: no recompile of compiled blocks, samplers.even_batches)
            assert 0 <= pads - (world * per_rank - count) < world * batches, where
            assert len(set(sizes)) == 1 and sizes[0] <= batch_size, (where, sizes)
            assert len(real) == count == len(set(real)), where  # each window exactly once
            reference = reference or sorted(real)
            assert sorted(real) == reference, where


def tiny_module() -> GPTLightningModule:
    """A random tiny GPT (the loss is compared, not its value); eval mode: dropout 0 anyway."""
    torch.manual_seed(0)
    cfg = GPTConfig(vocab_size=256, block_size=BLOCK, n_layer=1, n_head=2, n_embd=32)
    return GPTLightningModule(model=dataclasses.asdict(cfg), optim=dataclasses.asdict(OptimConfig()))


def plain_torch_loss(module: GPTLightningModule, rows: np.ndarray, ids: list[int]) -> float:
    """Σ token cross-entropy over the windows / their token count, in plain torch."""
    windows = torch.from_numpy(rows[ids])
    with torch.no_grad():
        logits = module.model.eval()(windows[:, :-1]).double()
    total = F.cross_entropy(logits.flatten(0, 1), windows[:, 1:].flatten(), reduction="sum")
    return float(total) / windows[:, 1:].numel()


def validate(module: GPTLightningModule, loader: torch.utils.data.DataLoader, root: Path) -> float:
    trainer = L.Trainer(
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=str(root),
    )
    (metrics,) = trainer.validate(module, dataloaders=loader, verbose=False)
    return metrics["val/loss"]


def test_val_loss_is_the_token_mean_over_the_subset(cache: Path, tmp_path: Path) -> None:
    """11 windows at batch 5 read as 3 batches of 4 (one of weight 0, padding to one batch shape):
    a mean of the batches' means would weigh the last batch's 3 windows 4/3x."""
    dm = datamodule(cache, val_windows=11, batch_size=5)
    rows = window_rows(dm)
    index = {row.tobytes(): k for k, row in enumerate(rows)}
    ids, weights, batches = read_back(dm, index)
    assert batches == [4, 4, 4] and weights.count(0.0) == 1
    ids = [k for k, w in zip(ids, weights, strict=True) if w == 1.0]
    module = tiny_module()
    got = validate(module, dm.val_dataloader(), tmp_path)
    assert got == pytest.approx(plain_torch_loss(module, rows, ids), abs=1e-6)


def test_padding_counts_for_nothing(cache: Path, tmp_path: Path) -> None:
    """Rank 2 of 3 for 7 windows holds 2 of them, 1 weight-0 pad to the ranks' 3 each and 1 to two
    batches of 2: val/loss is over the 2 only."""
    dm = datamodule(cache, rank=2, world=3, val_windows=7, batch_size=2)
    rows = window_rows(dm)
    index = {row.tobytes(): k for k, row in enumerate(rows)}
    ids, weights, _ = read_back(dm, index)
    assert weights == [1.0, 1.0, 0.0, 0.0]
    module = tiny_module()
    got = validate(module, dm.val_dataloader(), tmp_path)
    assert got == pytest.approx(plain_torch_loss(module, rows, ids[:2]), abs=1e-6)
    assert got != pytest.approx(plain_torch_loss(module, rows, ids), abs=1e-6)  # the check can tell


def test_bad_val_windows_are_one_line_naming_the_field(cache: Path) -> None:
    dm = datamodule(cache)
    n = len(window_rows(dm))
    with pytest.raises(ValueError) as info:
        datamodule(cache, val_windows=n + 1).val_dataloader()
    assert str(info.value) == (
        f"data.val_windows={n + 1} but the val split has only {n} windows of block_size={BLOCK} "
        f"tokens; accepted: 0 (all {n}) to {n}"
    )
    assert len(datamodule(cache, val_windows=n).val_dataloader()) == -(-n // 16)  # n itself is fine
    with pytest.raises(ValueError, match=r"^data\.val_windows=-1 must be >= 0 "):
        datamodule(cache, val_windows=-1)


def test_the_default_takes_the_whole_of_a_small_split(tmp_path: Path) -> None:
    """data.val_windows=null on a split of fewer than 128 windows scores each window once, in order."""
    cfg = DataConfig(cache_dir=str(tmp_path), num_proc=1, max_bytes=400_000)
    dm = TokenDataModule(cfg, block_size=BLOCK, seed=0)
    dm.trainer = SimpleNamespace(global_rank=0, world_size=1)  # type: ignore[assignment]
    rows = window_rows(dm)
    assert 0 < len(rows) < 128, len(rows)
    ids, weights, _ = read_back(dm, {row.tobytes(): k for k, row in enumerate(rows)})
    assert ids == list(range(len(rows))) and weights == [1.0] * len(rows)
