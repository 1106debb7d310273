"""model/ffn=moe (balance=bias): 2-process gloo DDP against one process at the same global batch of 4
windows under gradient accumulation 2 (issue 47 item 5): the losses, the final weights, the expert bias
(moved by loads all-reduced over ranks) and the moe/* telemetry (loads summed over ranks) agree.

Dropless with balance=bias, so each micro-batch's objective is a token mean (cross-entropy and the
router z-loss): 2 ranks x 2 micro-batches of 1 window give the step the gradient 1 process x 2
micro-batches of 2 give. (The aux loss E·Σ f_i·P_i of one micro-batch is not a sum over its tokens:
its gradient depends on how the batch is cut, so it is not compared across layouts.)
FSDP2 is not run here: it would need torchrun (tests/distributed/test_equivalence.py's third layout);
the experts are ordinary parameters to fully_shard, not checked with MoE yet.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from .helpers import BLOCK, read_metrics, run, series, train_cmd

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


def test_ddp_moe_matches_single_process(tmp_path: Path) -> None:
    base = overrides(tmp_path / "cache")
    single, ddp = tmp_path / "single", tmp_path / "ddp"
    one = ["data.batch_size=2", "trainer.devices=1"]
    two = ["data.batch_size=1", "trainer.devices=2", "trainer.strategy=ddp"]
    run(train_cmd(*base, *one, f"hydra.run.dir={single}"), tmp_path / "cwd1").check()
    run(train_cmd(*base, *two, f"hydra.run.dir={ddp}"), tmp_path / "cwd2").check()

    ref, got = read_metrics(single), read_metrics(ddp)
    for name in ("train/loss", "train/moe_z_loss"):
        want, have = series(ref, name), series(got, name)
        assert list(want) == list(have) == list(range(STEPS)), name
        for step, value in want.items():
            assert have[step] == pytest.approx(value, rel=RTOL), (name, step)
    # telemetry: loads summed over ranks before max/mean, entropy token-weighted over ranks
    # (not aux_loss: a micro-batch's E·Σ f_i·P_i depends on how the batch is cut, see above)
    keys = sorted({k for m in ref.values() for k in m if k.startswith("moe/") and "aux_loss" not in k})
    assert "moe/block_01/max_over_mean_load" in keys and "moe/block_00/bias_max" in keys
    for key in keys:
        want, have = series(ref, key), series(got, key)
        assert list(want) == list(have) == list(range(STEPS)), key
        for step, value in want.items():
            assert have[step] == pytest.approx(value, rel=1e-4, abs=1e-7), (key, step)

    a, b = state(single), state(ddp)
    assert a.keys() == b.keys()
    biases = [k for k in a if k.endswith("expert_bias")]
    assert len(biases) == 2 and all(a[k].abs().sum() > 0 for k in biases)  # the bias moved
    for key in a:
        torch.testing.assert_close(b[key], a[key], rtol=1e-4, atol=1e-6, msg=key)
