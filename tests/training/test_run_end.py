"""How a run ends and what it logs on the way: a final validation, one `lr` at the LR the step used,
throughput without validation time, logger=none, and the MFU peak for the run's precision."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import lightning as L
import pytest
import torch

from tests.training.rel_harness import csv_rows, series, train_here, with_callbacks


def test_a_run_off_the_interval_ends_with_a_validation(tmp_path: Path, cache: Path) -> None:
    summary = train_here(tmp_path, cache, "trainer.max_steps=7", "trainer.val_check_interval=5")
    val = series(tmp_path, "val/loss")
    assert sorted(val) == [4, 6]  # after step 5 (index 4) and after the last step (index 6)
    assert summary["final_val_loss"] == pytest.approx(val[6], rel=1e-6)
    assert [s for s, _ in summary["val_curve"]] == [5, 7]
    assert (tmp_path / "checkpoints" / "best.ckpt").is_file()


def test_a_run_ending_on_the_interval_validates_once(tmp_path: Path, cache: Path) -> None:
    train_here(tmp_path, cache, "trainer.max_steps=6", "trainer.val_check_interval=3")
    steps = [int(r["step"]) for r in csv_rows(tmp_path) if r.get("val/loss")]
    assert steps == [2, 5]


def _lr_formula(step: int, lr: float, min_lr: float, warmup: int, total: int) -> float:
    """Linear warmup from lr/warmup, then cosine from lr down to min_lr at the last step."""
    if step < warmup:
        return lr * (step + 1) / warmup
    progress = (step - warmup) / (total - warmup)
    return min_lr + (lr - min_lr) * 0.5 * (1 + math.cos(math.pi * progress))


def test_lr_is_logged_once_at_the_lr_the_step_used(tmp_path: Path, cache: Path) -> None:
    train_here(
        tmp_path,
        cache,
        "trainer.max_steps=8",
        "trainer.val_check_interval=100",
        "optim.warmup_steps=3",
        "optim.lr=1e-3",
        "optim.min_lr=1e-4",
    )
    rows = csv_rows(tmp_path)
    assert not [k for k in rows[0] if k.startswith("lr-")]  # LearningRateMonitor's duplicate is gone
    lr = series(tmp_path, "lr")
    assert sorted(lr) == list(range(8))
    for step, value in lr.items():
        assert value == pytest.approx(_lr_formula(step, 1e-3, 1e-4, 3, 8), rel=1e-6), step


def test_logger_none_trains_to_the_end(tmp_path: Path, cache: Path) -> None:
    summary = train_here(
        tmp_path, cache, "trainer.max_steps=3", "trainer.val_check_interval=3", "logger=none"
    )
    assert summary["status"] == "finished" and summary["final_val_loss"] is not None
    assert not (tmp_path / "csv").exists()


class FakeClock:
    """The throughput callback's clock: it moves only when told, so no verdict depends on the speed
    of the machine (the old test bounded a real step's wall time and failed once under load)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def perf_counter(self) -> float:
        return self.now


class _Tick(L.Callback):
    """After the app's callbacks: each training step takes `step` s, each validation batch `val` s."""

    def __init__(self, clock: FakeClock, step: float, val: float) -> None:
        self.clock, self.step, self.val = clock, step, val

    def on_train_batch_end(self, *args: Any, **kwargs: Any) -> None:
        self.clock.now += self.step

    def on_validation_batch_end(self, *args: Any, **kwargs: Any) -> None:
        self.clock.now += self.val


def test_throughput_leaves_validation_time_out(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gptlab.training.callbacks import throughput as tp

    # 4 log intervals of 3 steps of 1 s each; the validation after step 6 takes 100 s (1 batch)
    clock = FakeClock()
    monkeypatch.setattr(tp, "time", clock)  # the module's only use of `time` is perf_counter
    with_callbacks(monkeypatch, _Tick(clock, step=1.0, val=100.0))
    train_here(
        tmp_path,
        cache,
        "trainer.max_steps=12",
        "trainer.val_check_interval=6",
        "trainer.log_every_n_steps=3",
        "data.val_windows=4",
    )
    assert sorted(series(tmp_path, "val/loss")) == [5, 11]  # the validation is inside (6, 9]
    step_time = series(tmp_path, "throughput/step_time")
    # the first interval (warm-up) is not logged; counted, the validation would make (6, 9] 34.3 s/step
    assert step_time == {5: 1.0, 8: 1.0, 11: 1.0}, step_time
    tokens = series(tmp_path, "throughput/tokens_per_sec")
    assert tokens == {5: 4 * 32, 8: 4 * 32, 11: 4 * 32}, tokens  # data.batch_size × block_size per 1 s


def test_mfu_peak_follows_the_chip_and_precision(monkeypatch: pytest.MonkeyPatch) -> None:
    from gptlab.training.callbacks import throughput as tp

    # NVIDIA's datasheet figures, dense (no sparsity)
    cases = {
        ("NVIDIA H100 80GB HBM3", "bf16-mixed"): 989.4e12,
        ("NVIDIA H100 PCIe", "bf16-mixed"): 756e12,
        ("NVIDIA H100 PCIe", "32-true"): 51.2e12,
        ("NVIDIA H200", "bf16-mixed"): 989.4e12,
        ("NVIDIA H200", "32-true"): 66.9e12,
        ("NVIDIA A100-SXM4-80GB", "16-mixed"): 312e12,
    }
    for (name, precision), want in cases.items():
        monkeypatch.setattr(torch.cuda, "get_device_name", lambda *_a, n=name: n)
        assert tp.peak_flops(torch.device("cuda", 0), precision) == want, (name, precision)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *_a: "NVIDIA H100 PCIe")
    before = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("high")  # fp32 matmuls on tensor cores
        assert tp.peak_flops(torch.device("cuda", 0), "32-true") == 378e12
    finally:
        torch.set_float32_matmul_precision(before)
    assert tp.peak_flops(torch.device("cpu"), "32-true") is None
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *_a: "Some Future GPU")
    assert tp.peak_flops(torch.device("cuda", 0), "bf16-mixed") is None
