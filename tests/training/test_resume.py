"""Exact resume: interrupted at step 5, resumed from the step-4 checkpoint, the losses are bit-identical."""

from __future__ import annotations

import logging
from pathlib import Path

import lightning as L
import pytest
import torch

import gptlab.training.callbacks.rng as rng
from tests.training.rel_harness import series, train_here, with_callbacks

# dropout makes the RNG matter; checkpoint at step 4 and validate there too (validation draws from the
# torch generator: the resumed run skips that validation, so this checks it leaves the stream alone)
RUN = [
    "trainer.max_steps=8",
    "trainer.deterministic=true",
    "model.dropout=0.2",
    "trainer.val_check_interval=4",
    "callbacks.checkpoint_every_n_steps=4",
]


class Crash(L.Callback):
    """Fails the run as step `at` starts (after the step-4 checkpoint was written)."""

    def __init__(self, at: int) -> None:
        self.at = at

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule, batch, i) -> None:
        if trainer.global_step == self.at:
            raise RuntimeError("simulated crash")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, cache: Path) -> dict[str, Path]:
    """An uninterrupted 8-step run and one that crashed at step 5."""
    base = tmp_path_factory.mktemp("resume")
    train_here(base / "full", cache, *RUN)
    with pytest.MonkeyPatch.context() as mp:
        with_callbacks(mp, Crash(at=5))
        with pytest.raises(RuntimeError, match="simulated crash"):
            train_here(base / "crashed", cache, *RUN)
    torch.use_deterministic_algorithms(False)
    return {"full": base / "full", "crashed": base / "crashed", "base": base}


def test_checkpoint_holds_rng_states_and_loads_weights_only(runs: dict[str, Path]) -> None:
    ckpt = torch.load(runs["crashed"] / "checkpoints" / "last.ckpt", weights_only=True)
    assert ckpt["global_step"] == 4
    (states,) = ckpt["callbacks"]["RNGStateCheckpoint"]["ranks"]  # one process: one rank's states
    assert {"torch", "numpy", "python"} <= set(states)
    for key in ("optimizer_states", "lr_schedulers", "loops", "hyper_parameters", "state_dict"):
        assert ckpt[key], key


def test_resumed_losses_are_bit_identical(runs: dict[str, Path], cache: Path) -> None:
    resumed = runs["base"] / "resumed"
    train_here(resumed, cache, *RUN, f"ckpt_path={runs['crashed'] / 'checkpoints' / 'last.ckpt'}")
    full, again = series(runs["full"], "train/loss"), series(resumed, "train/loss")
    assert sorted(again) == [4, 5, 6, 7]
    assert {s: again[s] for s in again} == {s: full[s] for s in again}  # exact float equality


def test_without_rng_restore_the_losses_differ(
    runs: dict[str, Path], cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The control: the test above would fail if the RNG states were not restored."""
    monkeypatch.setattr(rng, "restore_rng", lambda state: None)
    resumed = runs["base"] / "resumed-no-rng"
    train_here(resumed, cache, *RUN, f"ckpt_path={runs['crashed'] / 'checkpoints' / 'last.ckpt'}")
    full, again = series(runs["full"], "train/loss"), series(resumed, "train/loss")
    assert any(again[s] != full[s] for s in again)


def test_another_world_size_restores_what_it_can(caplog: pytest.LogCaptureFixture) -> None:
    """Rank r takes entry r; ranks without one keep their seeded state; rank 0 says so in one line."""
    saved = {"ranks": [{"torch": torch.tensor([r])} for r in range(3)]}
    legacy = {"torch": torch.tensor([7])}  # flat: written before per-rank states, by rank 0
    with caplog.at_level(logging.WARNING, logger=rng.__name__):
        assert rng.own_state(saved, 1, 3)["torch"].item() == 1 and not caplog.records
        assert rng.own_state(saved, 1, 2)["torch"].item() == 1 and not caplog.records  # rank 0 warns
        assert rng.own_state(saved, 0, 2)["torch"].item() == 0
        assert rng.own_state(legacy, 0, 2)["torch"].item() == 7
        assert rng.own_state(legacy, 1, 2) is None
    fewer, more = (r.getMessage() for r in caplog.records)
    assert fewer.endswith("ranks 0-1 restore their own, the states of rank 2 are not used"), fewer
    assert more.endswith("rank 0 restore their own, rank 1 keep the seeded state"), more
    assert "\n" not in fewer + more
