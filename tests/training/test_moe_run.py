# ruff: noqa: E501  (the BAD table holds the exact one-line errors, as docs/bad-inputs.md does)
"""`train.py model/ffn=moe` on the default run (tiny shapes): the routers' terms reach the objective and
the log, the expert bias moves as DeepSeek-V3's rule says in a real run, and bad inputs get one line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lightning as L
import pytest
import torch

from gptlab.errors import USER_ERRORS, one_line
from gptlab.model import moe
from tests.training.rel_harness import csv_rows, train_here, with_callbacks

GAMMA = 0.01


class BiasRecorder(L.Callback):
    """Each step's summed loads and bias before the optimizer step, and the bias after it."""

    def __init__(self) -> None:
        self.before: list[tuple[list[torch.Tensor], list[torch.Tensor]]] = []
        self.after: list[list[torch.Tensor]] = []

    def on_before_optimizer_step(self, trainer: L.Trainer, pl_module: Any, optimizer: Any) -> None:
        layers = moe.moe_layers(pl_module.model)
        self.before.append(([m.step_load.clone() for m in layers], [m.expert_bias.clone() for m in layers]))  # type: ignore[union-attr]

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: Any, *args: Any) -> None:
        self.after.append([m.expert_bias.clone() for m in moe.moe_layers(pl_module.model)])


def test_moe_trains_and_the_bias_follows_the_rule(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorder = BiasRecorder()
    with_callbacks(monkeypatch, recorder)
    metrics = train_here(
        tmp_path,
        cache,
        "model/ffn=moe",
        "model.moe.n_experts=4",
        "model.moe.balance=bias",
        f"model.moe.bias_update_rate={GAMMA}",
        "model.moe.first_dense_layers=1",
        "trainer.max_steps=3",
        "trainer.val_check_interval=3",
    )
    assert metrics["status"] == "finished"
    assert len(recorder.before) == len(recorder.after) == 3
    for (loads, biases), after in zip(recorder.before, recorder.after, strict=True):
        assert len(loads) == 1  # block 0 stayed dense
        for load, bias, new in zip(loads, biases, after, strict=True):
            assert load.sum() > 0
            torch.testing.assert_close(new, bias + GAMMA * torch.sign(load.mean() - load))
    assert recorder.after[-1][0].abs().sum() > 0
    logged = {k for row in csv_rows(tmp_path) for k, v in row.items() if v}
    assert {"train/moe_aux_loss", "train/moe_z_loss", "train/moe_routing_loss"} <= logged
    # balance=bias: only the z term (0.001 · z) reaches the objective
    row = next(r for r in csv_rows(tmp_path) if r.get("train/moe_routing_loss"))
    assert float(row["train/moe_routing_loss"]) == pytest.approx(
        0.001 * float(row["train/moe_z_loss"]), rel=1e-5
    )


BAD = {
    "model.moe.top_k=9": "model.moe.top_k=9 exceeds model.moe.n_experts=8; accepted: an integer from 1 to n_experts",
    "model.moe.n_experts=0": "model.moe.n_experts=0 is not accepted; give an integer >= 1",
    "model.moe.capacity_factor=0": "model.moe.capacity_factor=0.0 is not accepted: a capacity of 0 drops every "
    "token; give a finite number > 0 (each expert keeps ⌈cf·tokens·top_k/n_experts⌉) or null (dropless)",
    "model.moe.router=topk": "model.moe.router='topk' is not accepted; choose one of softmax, sigmoid",
    "model.moe.balance=loss_free": "model.moe.balance='loss_free' is not accepted; choose one of aux_loss, bias, none",
    "model/parametrization=mup": "model.ffn=moe cannot be combined with model.parametrization=mup: μP's width "
    "rules for experts and router are not stated; accepted: parametrization=sp, placement pre, post or sandwich",
}


@pytest.mark.parametrize("override", BAD)
def test_bad_moe_inputs_one_line(tmp_path: Path, cache: Path, override: str) -> None:
    """The rows of docs/bad-inputs.md's MoE section, through the CLI's own path."""
    try:
        train_here(tmp_path, cache, "trainer.max_steps=1", "model/ffn=moe", override)
    except USER_ERRORS as err:
        assert one_line(err) == f"error: {BAD[override]}"
        return
    raise AssertionError(f"{override} did not fail")


def test_module_objective_adds_the_routing_penalty() -> None:
    """The LightningModule's objective is CE + Σ_layers (aux_loss_coef·aux + router_z_loss·z)."""
    import dataclasses

    from gptlab.config import OptimConfig
    from gptlab.training.module import GPTLightningModule

    model = {
        "n_layer": 2,
        "n_embd": 16,
        "n_head": 2,
        "block_size": 16,
        "vocab_size": 64,
        "ffn": "moe",
        "moe": {"n_experts": 4, "top_k": 2, "aux_loss_coef": 0.5, "router_z_loss": 0.25},
    }
    module = GPTLightningModule(model=model, optim=dataclasses.asdict(OptimConfig()))
    batch = torch.randint(0, 64, (2, 17), generator=torch.Generator().manual_seed(0))
    objective = module._loss(batch)
    layers = moe.moe_layers(module.model)
    expected = module.last_ce + sum(0.5 * m.aux_loss + 0.25 * m.z_loss for m in layers)  # type: ignore[operator]
    torch.testing.assert_close(objective.detach(), expected.detach())


def test_export_of_a_moe_model_picks_its_target_or_is_refused_in_one_line() -> None:
    """model/ffn=moe's defaults are Mixtral's shape; a router no target has is refused by name
    (every target and refusal: tests/export/test_hf_moe.py, tests/export/test_hf_moe_refusals.py)."""
    from gptlab.export.targets import check_exportable
    from gptlab.model import GPTConfig

    assert check_exportable(GPTConfig(ffn="moe")) == "mixtral"
    with pytest.raises(ValueError) as err:
        check_exportable(GPTConfig(ffn="moe", moe={"router": "sigmoid"}))
    assert str(err.value) == (
        "model.moe.router='sigmoid' cannot be expressed by OlmoeForCausalLM, MixtralForCausalLM or "
        "Qwen3MoeForCausalLM (their routers score with a softmax over the experts); accepted: 'softmax'"
    )


def test_resume_keeps_the_expert_bias(tmp_path: Path, cache: Path) -> None:
    """expert_bias is a persistent buffer: a resumed run starts from the bias the checkpoint holds."""
    run = [
        "model/ffn=moe",
        "model.moe.n_experts=4",
        "model.moe.balance=bias",
        "model.moe.bias_update_rate=0.01",
    ]
    train_here(tmp_path / "a", cache, *run, "trainer.max_steps=2", "trainer.val_check_interval=2")
    ckpt = tmp_path / "a" / "checkpoints" / "last.ckpt"
    saved = torch.load(ckpt, map_location="cpu", weights_only=True)["state_dict"]
    biases = {k: v for k, v in saved.items() if k.endswith("expert_bias")}
    assert biases and any(v.abs().sum() > 0 for v in biases.values())  # (±γ steps may cancel in one)
    recorder = BiasRecorder()
    import gptlab.training.app as app

    original = app.build_callbacks
    app.build_callbacks = lambda *a, **k: [*original(*a, **k), recorder]  # type: ignore[assignment]
    try:
        train_here(
            tmp_path / "b",
            cache,
            *run,
            "trainer.max_steps=3",
            "trainer.val_check_interval=3",
            f"ckpt_path={ckpt}",
        )
    finally:
        app.build_callbacks = original
    first_bias = recorder.before[0][1]
    names = sorted(biases)
    for name, bias in zip(names, first_bias, strict=True):
        torch.testing.assert_close(bias, biases[name])
