"""Non-finite gradients: a NaN injected into one layer's gradient is caught and named; stop / skip."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import lightning as L
import pytest
import torch

from gptlab.training.callbacks.nonfinite import NonFiniteError, NonFiniteGuard
from tests.training.rel_harness import series, train_here, with_callbacks

BAD_STEP = 3
BAD_PARAM = "blocks.1.ffn.down_proj.weight"
RUN = ["trainer.max_steps=6", "trainer.val_check_interval=2", "callbacks.checkpoint_every_n_steps=2"]


class InjectNaN(L.Callback):
    """Test-only: after backward of step BAD_STEP, one entry of one layer's gradient becomes NaN.

    Also records the parameters around that step, and the optimizer's step count at the end.
    """

    def __init__(self) -> None:
        self.before: list[torch.Tensor] | None = None
        self.after: list[torch.Tensor] | None = None

    def on_after_backward(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.global_step == BAD_STEP:
            dict(pl_module.model.named_parameters())[BAD_PARAM].grad[0, 0] = float("nan")
            self.before = [p.detach().clone() for p in pl_module.parameters()]

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, *args) -> None:
        if self.before is not None and self.after is None:
            self.after = [p.detach().clone() for p in pl_module.parameters()]


def test_stop_names_step_and_layer_and_keeps_last_good_checkpoint(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with_callbacks(monkeypatch, InjectNaN())
    with pytest.raises(NonFiniteError) as info:
        train_here(tmp_path, cache, *RUN, "callbacks.on_nonfinite=stop")
    msg = str(info.value)
    assert "\n" not in msg
    assert f"step {BAD_STEP} in block_01/ffn ({BAD_PARAM})" in msg
    assert "last.ckpt" in msg
    ckpt = torch.load(tmp_path / "checkpoints" / "last.ckpt", weights_only=True)
    assert ckpt["global_step"] == 2  # written after step index 1; nothing written after the bad step
    assert all(torch.isfinite(v).all() for v in ckpt["state_dict"].values())
    status = json.loads((tmp_path / "metrics.json").read_text())
    assert status["status"] == "failed" and "non-finite gradient at step 3" in status["error"]


def test_skip_drops_exactly_that_update_and_counts_it(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    probe = InjectNaN()
    with_callbacks(monkeypatch, probe)
    with caplog.at_level(logging.WARNING):
        result = train_here(tmp_path, cache, *RUN, "callbacks.on_nonfinite=skip")
    assert result["status"] == "finished" and result["steps"] == 6
    assert any(f"step {BAD_STEP} in block_01/ffn ({BAD_PARAM})" in r.message for r in caplog.records)
    assert probe.before is not None and probe.after is not None
    assert all(torch.equal(a, b) for a, b in zip(probe.before, probe.after, strict=True))
    skipped = series(tmp_path, "train/skipped_steps")
    assert skipped[BAD_STEP - 1] == 0 and skipped[BAD_STEP] == 1 and skipped[5] == 1
    ckpt = torch.load(tmp_path / "checkpoints" / "last.ckpt", weights_only=True)
    assert all(torch.isfinite(v).all() for v in ckpt["state_dict"].values())
    steps = {float(s["step"]) for s in ckpt["optimizer_states"][0]["state"].values()}
    assert steps == {5.0}  # six optimizer steps, one of them dropped: moments saw five updates


@pytest.mark.parametrize("fused", [False, True])
def test_guard_leaves_parameters_and_optimizer_state_untouched(fused: bool) -> None:
    """Both mechanisms: grads set to None (non-fused) and found_inf (fused AdamW, no host sync)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 2))
    opt = torch.optim.AdamW(model.parameters(), lr=0.1, fused=fused)
    guard = NonFiniteGuard()
    for step in range(3):
        model(torch.randn(8, 4)).square().mean().backward()
        if step == 1:
            model[1].weight.grad[0, 1] = float("inf")
            before = [p.detach().clone() for p in model.parameters()]
            moments = [opt.state[p]["exp_avg"].clone() for p in model.parameters()]
        guard.total_norm(model.named_parameters(), opt, step)
        opt.step()
        if step == 1:
            assert all(torch.equal(a, p) for a, p in zip(before, model.parameters(), strict=True))
            assert all(
                torch.equal(m, opt.state[p]["exp_avg"])
                for m, p in zip(moments, model.parameters(), strict=True)
            )
        opt.zero_grad()
    assert guard.seen() == 1
    assert guard.describe("first") == (1, ["1.weight"], ["1.weight"])
    assert {float(opt.state[p]["step"]) for p in model.parameters()} == {2.0}
    assert hasattr(opt, "found_inf") == fused
