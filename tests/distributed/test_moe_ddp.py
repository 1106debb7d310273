"""model/ffn=moe (balance=bias): 2-process gloo DDP and 2-process FSDP2 (torchrun, fully_shard over the
(E, in, out) expert stacks) against one process at the same global batch of 4 windows under gradient
accumulation 2 (issue 47 item 5): the losses, the final weights (DDP), the expert bias (moved by loads
all-reduced over ranks; under FSDP2 its range in telemetry) and the moe/* telemetry (loads summed over
ranks) agree. The model also carries every attention switch of issue 46 (a headwise gate, a window of 8
on block 0 with block 1 global, NoPE on block 1, attention and logit soft-caps, document masking), so
the same runs show those under DDP and FSDP2 (item 6).

Dropless with balance=bias, so each micro-batch's objective is a token mean (cross-entropy and the
router z-loss): 2 ranks x 2 micro-batches of 1 window give the step the gradient 1 process x 2
micro-batches of 2 give. (The aux loss E·Σ f_i·P_i of one micro-batch is not a sum over its tokens:
its gradient depends on how the batch is cut, so it is not compared across layouts.)
The one process trains in the test's own, the two two-rank runs on the ranks spawned once for the
session's equality runs (tests/distributed/ranks.py: the app as train.py runs it, without the
command line's start-ups).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from .helpers import BLOCK, read_metrics, series
from .ranks import train_once

pytestmark = [pytest.mark.multiproc, pytest.mark.slow]
STEPS = 4
RTOL = 1e-5


def overrides(cache: Path) -> list[str]:
    return [
        "model.n_layer=2",
        "model.n_embd=32",
        "model.n_head=2",
        f"model.block_size={BLOCK}",
        "model/ffn=moe",
        "model.moe.n_experts=8",
        "model.moe.top_k=2",
        "model.moe.expert_hidden=16",
        "model.moe.balance=bias",
        "model.moe.bias_update_rate=0.01",
        # issue 46's attention switches ride along (item 6: each under DDP and FSDP2), one run for both
        "model.attn_gate=headwise",
        "model.window=8",
        "model.window_pattern=SL",
        "model.nope_every=2",
        "model.attn_softcap=50",
        "model.logit_softcap=30",
        "data.document_mask=true",
        "data.max_bytes=100000",
        f"data.cache_dir={cache}",
        f"trainer.max_steps={STEPS}",
        f"trainer.val_check_interval={STEPS}",
        "trainer.accumulate_grad_batches=2",
        "trainer.log_every_n_steps=1",
        "trainer.enable_progress_bar=false",
        "trainer.accelerator=cpu",
        "sample.max_new_tokens=0",
        "callbacks.telemetry.figures=false",
        "callbacks.tasks.names=[]",
        "logger=csv",
        "seed=7",
    ]


def state(run_dir: Path) -> dict[str, torch.Tensor]:
    ckpt = torch.load(run_dir / "checkpoints" / "last.ckpt", weights_only=True, map_location="cpu")
    return ckpt["state_dict"]


ONE = ["data.batch_size=2", "trainer.devices=1"]
TWO = ["data.batch_size=1", "trainer.devices=2"]


def two_rank_jobs(cache: Path) -> dict[str, list[str]]:
    """This module's two-rank runs, made on the session's spawned ranks (conftest.spawned_runs):
    DDP, and FSDP2 (fully_shard shards each (E, in, out) stack along E; the forward all-gathers
    them whole)."""
    return {
        "ddp": [*overrides(cache), *TWO, "trainer.strategy=ddp"],
        "fsdp": [*overrides(cache), *TWO, "trainer=fsdp"],
    }


@pytest.fixture(scope="module")
def runs(
    tmp_path_factory: pytest.TempPathFactory, cache: Path, spawned_runs: dict[str, Path]
) -> dict[str, Path]:
    """Layout -> run dir: the one-process reference (trained here) and the two two-rank runs."""
    single = tmp_path_factory.mktemp("moe-single")
    train_once(single, [*overrides(cache), *ONE])
    return {"single": single} | {name: spawned_runs[f"moe/{name}"] for name in ("ddp", "fsdp")}


def compare_logs(ref: dict, got: dict) -> None:
    """train/loss and the z loss per step; every moe/* key but aux_loss (not a token sum, see above)."""
    for name in ("train/loss", "train/moe_z_loss"):
        want, have = series(ref, name), series(got, name)
        assert list(want) == list(have) == list(range(STEPS)), name
        for step, value in want.items():
            assert have[step] == pytest.approx(value, rel=RTOL), (name, step)
    # telemetry: loads summed over ranks before max/mean, entropy token-weighted over ranks
    keys = sorted({k for m in ref.values() for k in m if k.startswith("moe/") and "aux_loss" not in k})
    assert "moe/block_01/max_over_mean_load" in keys and "moe/block_00/bias_max" in keys
    for key in keys:
        want, have = series(ref, key), series(got, key)
        assert list(want) == list(have) == list(range(STEPS)), key
        for step, value in want.items():
            assert have[step] == pytest.approx(value, rel=1e-4, abs=1e-7), (key, step)


def test_ddp_moe_matches_single_process(runs: dict[str, Path]) -> None:
    compare_logs(read_metrics(runs["single"]), read_metrics(runs["ddp"]))
    a, b = state(runs["single"]), state(runs["ddp"])
    assert a.keys() == b.keys()
    biases = [k for k in a if k.endswith("expert_bias")]
    assert len(biases) == 2 and all(a[k].abs().sum() > 0 for k in biases)  # the bias moved
    for key in a:
        torch.testing.assert_close(b[key], a[key], rtol=1e-4, atol=1e-6, msg=key)


def test_fsdp2_moe_matches_single_process(runs: dict[str, Path]) -> None:
    assert (runs["fsdp"] / "checkpoints" / "last.ckpt").is_dir()  # FSDP2 ran: a distributed checkpoint
    compare_logs(read_metrics(runs["single"]), read_metrics(runs["fsdp"]))
