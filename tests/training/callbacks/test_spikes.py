"""Spike forensics on the app's own path: one corrupted batch → exactly one spike record.

Step CORRUPT's batch is overwritten (in place, before the forward) with uniformly random tokens, so
its loss jumps far above the running average. The record must name that step, hold telemetry for it
and the next step (off the every-10 cadence), and its window indices, read back with the documented
numpy one-liner, must give the batch the loader produced before the corruption.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import pytest
import torch

from tests.training.rel_harness import csv_rows, train_here, with_callbacks

CORRUPT, STEPS = 24, 30
SPIKES = [
    f"trainer.max_steps={STEPS}",
    "trainer.val_check_interval=1000",
    "trainer.log_every_n_steps=10",
    "callbacks.spikes.warmup_steps=10",
    "callbacks.spikes.ema_decay=0.9",
    "optim.lr=3e-3",
    "optim.warmup_steps=5",
]


class Corrupt(L.Callback):
    """Keeps a copy of step CORRUPT's batch, then fills it with random tokens; snapshots weights."""

    def __init__(self) -> None:
        self.original: torch.Tensor | None = None
        self.before: torch.Tensor | None = None
        self.after: torch.Tensor | None = None

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: Any, batch: Any, batch_idx: int) -> None:
        if trainer.global_step == CORRUPT:
            self.original = batch.clone()
            vocab = pl_module.model.cfg.vocab_size
            batch.copy_(torch.randint(0, vocab, batch.shape, generator=torch.Generator().manual_seed(0)))
            self.before = pl_module.model.lm_head.weight.detach().clone()

    def on_train_batch_end(
        self, trainer: L.Trainer, pl_module: Any, outputs: Any, batch: Any, i: int
    ) -> None:
        if trainer.global_step == CORRUPT + 1:
            self.after = pl_module.model.lm_head.weight.detach().clone()


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("spike-cache")


@pytest.mark.parametrize("policy", ["record", "skip"])
def test_one_corrupted_batch_gives_one_spike_record(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch, policy: str
) -> None:
    corrupt = Corrupt()
    with_callbacks(monkeypatch, corrupt)
    run = tmp_path / "run"
    result = train_here(run, cache, *SPIKES, f"callbacks.spikes.on_spike={policy}")
    files = sorted((run / "spikes").glob("step_*.json"))
    assert [f.name for f in files] == [f"step_{CORRUPT}.json"]
    record = json.loads(files[0].read_text())
    assert record["step"] == CORRUPT and record["loss"] > record["ema"] + 6 * record["sigma"]
    assert set(record["telemetry"]) == {str(CORRUPT), str(CORRUPT + 1)}
    for step in (CORRUPT, CORRUPT + 1):
        numbers = record["telemetry"][str(step)]
        assert {"grad_norm/block_00", "attn_logit_max/block_01", "update_ratio/block_01"} <= set(numbers)
    assert "act_rms/block_00" in record["telemetry"][str(CORRUPT)]  # the second forward's numbers
    assert [b["block"] for b in record["blocks"]] and len(record["blocks"]) <= 3

    # the documented read-back: window indices → the tokens the loader gave before the corruption
    d = record["data"]
    t = np.memmap(d["token_file"], dtype=d["dtype"], mode="r")
    b = d["block_size"]
    back = np.stack([t[w * b : w * b + b + 1] for w in record["windows"]])
    assert corrupt.original is not None
    np.testing.assert_array_equal(back.astype(np.int64), corrupt.original.numpy())

    assert result["n_spikes"] == 1 and result["spike_steps"] == [CORRUPT]
    assert result["first_spike_step"] == CORRUPT
    assert result["first_spike_blocks"] == [b["block"] for b in record["blocks"]]
    on_disk = json.loads((run / "metrics.json").read_text())
    assert on_disk["n_spikes"] == 1 and on_disk["first_spike_step"] == CORRUPT

    assert corrupt.before is not None and corrupt.after is not None
    moved = not torch.equal(corrupt.before, corrupt.after)
    assert record["update_dropped"] is (policy == "skip")
    assert moved is (policy == "record")  # skip: the corrupted step's update never reached the weights


class CorruptAndBreakRouter(Corrupt):
    """Step CORRUPT's batch as above, and block 1's router zeroed: every score ties, so top-k sends
    all tokens to the same experts and that layer's max/mean load jumps while block 0's does not."""

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: Any, batch: Any, batch_idx: int) -> None:
        super().on_train_batch_start(trainer, pl_module, batch, batch_idx)
        if trainer.global_step == CORRUPT:
            with torch.no_grad():
                pl_module.model.blocks[1].ffn.router.weight.zero_()


def test_a_spike_under_moe_names_the_router_that_broke(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with_callbacks(monkeypatch, CorruptAndBreakRouter())
    run = tmp_path / "run"
    moe = [
        "model/ffn=moe",
        "model.moe.n_experts=8",
        "model.moe.top_k=1",
        "callbacks.telemetry.every_n_steps=2",
    ]
    result = train_here(run, cache, *SPIKES, *moe)
    record = json.loads((run / "spikes" / f"step_{CORRUPT}.json").read_text())
    named = [r["block"] for r in record["routers"]]
    assert named == ["block_01", "block_00"] and result["first_spike_routers"] == named
    broken = record["routers"][0]
    at = record["telemetry"][str(CORRUPT)]
    load = at["moe/block_01/max_over_mean_load"]
    assert broken["max_over_mean_load"] == load == pytest.approx(8.0)  # all on one expert: 8 / 1
    assert broken["router_entropy"] == pytest.approx(math.log(8), rel=1e-5)  # every score tied
    logged = {
        int(r["step"]): float(r["moe/block_01/max_over_mean_load"])
        for r in csv_rows(run)
        if r.get("moe/block_01/max_over_mean_load")
    }
    before = max(s for s in logged if s < CORRUPT)
    # tokens per expert (8 <= EXPERT_KEYS_MAX): the step's 4 windows x 32 tokens x top-1 on every log
    # step, and all of them on one expert when every score ties
    tokens = [at[f"moe/block_01/tokens/expert_{e:02d}"] for e in range(8)]
    assert sorted(tokens) == [0.0] * 7 + [128.0]
    for row in csv_rows(run):
        counts = [row.get(f"moe/block_00/tokens/expert_{e:02d}") for e in range(8)]
        assert not any(counts) or sum(float(c) for c in counts) == 128.0, row
    assert broken["load_ratio"] == pytest.approx(8.0 / logged[before]), (before, logged)
