"""TokenDataModule: window contents, the DDP-exact resumable stream, the val loader, exact resume.

The val subset's spread and sharding are tested in tests/oracle/test_validation_subset.py.
"""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace

import lightning as L
import numpy as np
import pytest
import torch

from gptlab.data.datamodule import StreamBatchSampler, TokenDataModule


def _stream(sampler: StreamBatchSampler, n_batches: int) -> list[list[int]]:
    it = iter(sampler)
    return [next(it) for _ in range(n_batches)]


def _fake_trainer(**kw: object) -> SimpleNamespace:
    fields: dict[str, object] = dict(
        global_step=0, accumulate_grad_batches=1, max_steps=10, global_rank=0, world_size=1
    )
    fields.update(kw)
    return SimpleNamespace(**fields)


def test_ranks_union_equals_single_process_batch() -> None:
    n, b, w = 37, 3, 2
    single = StreamBatchSampler(n, b * w, seed=7, epoch_batches=20)
    ranks = [StreamBatchSampler(n, b, 7, 20, rank=r, world_size=w) for r in range(w)]
    per_rank = [_stream(s, 20) for s in ranks]
    for step, batch in enumerate(_stream(single, 20)):
        union = [per_rank[r][step][i] for i in range(b) for r in range(w)]
        assert union == batch  # same windows, interleaved g % W == r
        assert sorted(per_rank[0][step] + per_rank[1][step]) == sorted(batch)


def test_each_pass_is_a_seeded_permutation() -> None:
    n = 12
    flat = sum(_stream(StreamBatchSampler(n, 4, seed=3, epoch_batches=9), 9), [])
    passes = [flat[i : i + n] for i in range(0, len(flat), n)]
    assert all(sorted(p) == list(range(n)) for p in passes)
    assert passes[0] != passes[1] != passes[2]  # new order every pass (seed + p)
    assert flat == sum(_stream(StreamBatchSampler(n, 4, 3, 9), 9), [])
    assert flat != sum(_stream(StreamBatchSampler(n, 4, 4, 9), 9), [])


def test_starting_at_k_reproduces_the_tail() -> None:
    full = _stream(StreamBatchSampler(29, 2, seed=1, epoch_batches=40, world_size=2, rank=1), 40)
    for k in (1, 13, 27):
        tail = StreamBatchSampler(29, 2, 1, 40, start=k * 4, rank=1, world_size=2)
        assert tail.remaining(k * 4) == 40 - k
        assert list(tail) == full[k:]
    with pytest.raises(ValueError, match="multiple of 4"):
        list(StreamBatchSampler(29, 2, 1, 40, start=3, world_size=2))


def test_windows_are_memmap_slices(text_cfg) -> None:
    dm = TokenDataModule(text_cfg(val_fraction=0.25, batch_size=4), block_size=16, seed=0)
    dm.setup("fit")
    tokens = np.asarray(dm.prepare().tokens("train"))
    batch = next(iter(dm.train_dataloader()))
    assert batch.dtype == torch.long and batch.shape == (4, 17)
    for row in batch.numpy():
        starts = [k * 16 for k in range(len(dm.dataset("train"))) if (tokens[k * 16] == row[0])]
        assert any(np.array_equal(tokens[s : s + 17], row) for s in starts)
    assert dm.vocab_size == 256 and dm.tokenizer is not None
    n_bytes, n_tokens = dm.meta["n_bytes"]["val"], dm.meta["n_tokens"]["val"]
    assert dm.bytes_per_token == n_bytes / n_tokens < 1.0  # one BYTE_EOS per document
    assert dm.decode(torch.tensor([104, 105])) == "hi"


def test_val_loader_with_val_windows_0_reads_every_window_in_order(text_cfg) -> None:
    cfg = text_cfg(val_fraction=0.25, batch_size=3, val_windows=0)
    dm = TokenDataModule(cfg, block_size=8, seed=0)
    n_val = len(dm.dataset("val"))
    tokens = np.asarray(dm.prepare().tokens("val"))
    batches = list(dm.val_dataloader())
    rows = torch.cat([b[0] for b in batches]).numpy()
    weights = torch.cat([b[1] for b in batches])
    expected = np.stack([tokens[k * 8 : k * 8 + 9] for k in range(n_val)])
    assert np.array_equal(rows, expected)
    assert torch.equal(weights, torch.ones(n_val))  # one process: no padding
    assert len(batches) == -(-n_val // 3)


def test_loader_length_and_start_follow_the_trainer(text_cfg) -> None:
    dm = TokenDataModule(text_cfg(val_fraction=0.25, batch_size=2), block_size=8, seed=5)
    dm.trainer = _fake_trainer(max_steps=10, accumulate_grad_batches=3, world_size=2)
    fresh = dm.train_dataloader()
    assert len(fresh) == 30
    full = list(fresh.batch_sampler)
    dm.trainer.global_step = 4  # as restored from a checkpoint
    resumed = list(dm.train_dataloader().batch_sampler)
    assert resumed == full[12:]
    dm.trainer = _fake_trainer(max_steps=-1, world_size=1)
    n_windows = len(dm.dataset("train"))
    assert len(dm.train_dataloader()) == n_windows // 2


def test_too_short_split_names_split_and_sizes(make_cfg, tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("short one")
    (tmp_path / "b.txt").write_text("a longer document " * 50)
    dm = TokenDataModule(
        make_cfg(source="text", path=str(tmp_path / "*.txt"), val_fraction=0.5),
        block_size=64,
        seed=0,
    )
    with pytest.raises(ValueError, match=r"val split has 10 tokens.*block_size\+1=65"):
        dm.setup("fit")


def test_state_dict_warns_on_changed_data(text_cfg, caplog) -> None:
    dm = TokenDataModule(text_cfg(val_fraction=0.25), block_size=8, seed=0)
    state = dm.state_dict()
    assert state["fingerprint"] == dm.meta["fingerprint"]
    with caplog.at_level(logging.WARNING, logger="gptlab.data.datamodule"):
        dm.load_state_dict(state)
        assert not caplog.records
        dm.load_state_dict({**state, "fingerprint": "0000"})
    assert "differs" in caplog.text


class _Recorder(L.LightningModule):
    """Records every micro-batch it trains on."""

    def __init__(self, seen: list[torch.Tensor]) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(1))
        self.seen = seen

    def training_step(self, batch: torch.Tensor, batch_idx: int) -> torch.Tensor:
        self.seen.append(batch.clone())
        return (self.w * batch.float().mean()).sum()

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.0)


def _fit(dm: TokenDataModule, seen: list, max_steps: int, root: Path, ckpt: str | None = None):
    trainer = L.Trainer(
        accelerator="cpu",
        max_steps=max_steps,
        accumulate_grad_batches=2,
        limit_val_batches=0,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        use_distributed_sampler=False,
        default_root_dir=root,
        callbacks=[
            L.pytorch.callbacks.ModelCheckpoint(dirpath=root / "ckpt", every_n_train_steps=1, save_top_k=-1)
        ],
    )
    trainer.fit(_Recorder(seen), datamodule=dm, ckpt_path=ckpt)
    return trainer


@pytest.fixture(scope="module")
def straight_run(tmp_path_factory) -> dict:
    """One uninterrupted 8-step run (2 micro-batches per step), checkpointed after every step."""
    return {"seen": [], "root": tmp_path_factory.mktemp("straight")}


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("resume_step", [3, 5])
def test_lightning_resume_is_exact(text_cfg, tmp_path: Path, straight_run, resume_step) -> None:
    cfg = text_cfg(val_fraction=0.25, batch_size=2)
    straight, root = straight_run["seen"], straight_run["root"]
    if not straight:
        first = _fit(TokenDataModule(cfg, block_size=8, seed=11), straight, 8, root)
        straight_run["epoch"] = first.current_epoch
    assert len(straight) == 16
    resumed: list[torch.Tensor] = []
    ckpt = str(root / "ckpt" / f"epoch=0-step={resume_step}.ckpt")
    trainer = _fit(TokenDataModule(cfg, block_size=8, seed=11), resumed, 8, tmp_path, ckpt)
    assert trainer.global_step == 8 and trainer.current_epoch == straight_run["epoch"]
    assert len(resumed) == 16 - 2 * resume_step
    assert all(torch.equal(a, b) for a, b in zip(resumed, straight[2 * resume_step :], strict=True))
