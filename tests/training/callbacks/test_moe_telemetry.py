"""moe/block_XX/* (issue 47 item 4) against plain float64 torch: a real run (accumulate 2, capacity,
balance=bias) records each MoE layer's input, router weight and bias at every training forward; the
test recomputes the routing from them and compares it with what LayerTelemetry logged for the step."""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path
from typing import Any

import lightning as L
import pytest
import torch

from gptlab.dashboards.keys import RunShape, expert_keys, moe_blocks
from gptlab.dashboards.view import Target, build_view, panel_keys
from gptlab.model import moe
from gptlab.model.moe_config import EXPERT_KEYS_MAX
from gptlab.training.callbacks.telemetry import LayerTelemetry
from tests.training.rel_harness import TINY, compose_cfg, train_here, with_callbacks

E, K, CF, STEPS, ACC = 32, 2, 1.0, 3, 2
MOE = [
    "model/ffn=moe",
    f"model.moe.n_experts={E}",
    f"model.moe.top_k={K}",
    "model.moe.expert_hidden=8",
    "model.moe.balance=bias",
    "model.moe.bias_update_rate=0.01",
    f"model.moe.capacity_factor={CF}",
    "model.moe.first_dense_layers=1",
]


class RoutingRecorder(L.Callback):
    """Per optimizer step and MoE layer: each training forward's (input, router weight, bias), and
    the bias after the step; at the end, telemetry's history."""

    def __init__(self) -> None:
        self.seen: dict[tuple[int, str], list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]] = {}
        self.after: dict[tuple[int, str], torch.Tensor] = {}
        self.history: list[tuple[int, dict[str, float]]] = []
        self.hooked = False

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: Any, batch: Any, i: int) -> None:
        if self.hooked:
            return
        self.hooked = True
        for name, layer in pl_module.model.named_modules():
            if isinstance(layer, moe.MoE):
                block = f"block_{int(name.split('.')[1]):02d}"

                def pre(mod: moe.MoE, args: Any, block: str = block) -> None:
                    if mod.training:
                        x = args[0].detach().double().reshape(-1, args[0].shape[-1])
                        w = mod.router.weight.detach().double().clone()
                        b = mod.expert_bias.detach().double().clone()
                        self.seen.setdefault((trainer.global_step, block), []).append((x, w, b))

                layer.register_forward_pre_hook(pre)

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: Any, *args: Any) -> None:
        for name, layer in pl_module.model.named_modules():
            if isinstance(layer, moe.MoE):
                block = f"block_{int(name.split('.')[1]):02d}"
                self.after[(trainer.global_step - 1, block)] = layer.expert_bias.double().clone()

    def on_fit_end(self, trainer: L.Trainer, pl_module: Any) -> None:
        telemetry = next(c for c in trainer.callbacks if isinstance(c, LayerTelemetry))  # type: ignore[attr-defined]
        self.history = list(telemetry.history)


def oracle(forwards: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]], bias_after: torch.Tensor) -> dict:
    """The step's routing in float64 from each micro-batch's router input, weight and bias."""
    load = torch.zeros(E, dtype=torch.float64)
    ent = tokens = aux = z = dropped = 0.0
    for x, w, b in forwards:
        logits = x @ w.T
        p = logits.softmax(dim=-1)
        chosen = (p + b).topk(K, dim=-1).indices
        counts = torch.bincount(chosen.reshape(-1), minlength=E).double()
        n = x.shape[0]
        cap = math.ceil(CF * n * K / E)
        dropped += (counts - cap).clamp_min(0).sum().item()
        load += counts
        ent += -(p * p.log()).sum().item()
        tokens += n
        aux += E * ((counts / (n * K)) * p.mean(dim=0)).sum().item()
        z += torch.logsumexp(logits, dim=-1).pow(2).mean().item()
    return {
        "max_over_mean_load": (load.max() / load.mean()).item(),
        "dead_experts": float((load == 0).sum()),
        "router_entropy": ent / tokens,
        "aux_loss": aux / len(forwards),
        "z_loss": z / len(forwards),
        "dropped": dropped,
        "bias_max": bias_after.max().item(),
        "bias_min": bias_after.min().item(),
        # tokens/expert_YY only for layers of at most EXPERT_KEYS_MAX experts (this run has more)
        **({f"expert_{e:02d}": load[e].item() for e in range(E)} if E <= EXPERT_KEYS_MAX else {}),
    }


def test_moe_telemetry_equals_a_float64_recomputation(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorder = RoutingRecorder()
    with_callbacks(monkeypatch, recorder)
    train_here(
        tmp_path,
        cache,
        *MOE,
        f"trainer.accumulate_grad_batches={ACC}",
        f"trainer.max_steps={STEPS}",
        f"trainer.val_check_interval={STEPS}",
    )
    assert [s for s, _ in recorder.history] == list(range(STEPS))
    dead = 0.0
    for step, metrics in recorder.history:
        forwards = recorder.seen[(step, "block_01")]
        assert len(forwards) == ACC
        want = oracle(forwards, recorder.after[(step, "block_01")])
        got = {k.rsplit("/", 1)[1]: v for k, v in metrics.items() if k.startswith("moe/block_01/")}
        assert not any(k.startswith("moe/block_00/") for k in metrics)  # the dense block
        assert set(got) == set(want)
        for key, value in want.items():
            assert got[key] == pytest.approx(value, rel=1e-5, abs=1e-9), (step, key)
        dead += want["dead_experts"]
        assert want["dropped"] > 0
    assert dead > 0  # some step left an expert without a token
    assert recorder.history[-1][1]["moe/block_01/bias_max"] > 0

    # the wandb view's MoE section names exactly the moe/* keys the run logged
    from omegaconf import OmegaConf

    model = OmegaConf.to_container(compose_cfg(*TINY, *MOE).model, resolve=True)
    shape = RunShape(
        groups=("total",), telemetry=True, act_rms=False, log_steps=True, throughput=False,
        attention=False, grad_clip=False, z_loss=False, moe_blocks=moe_blocks(model), moe_bias=True,
        moe_experts=expert_keys(model),
    )  # fmt: skip
    view = build_view(shape, Target(entity="e", project="p", name="v"))
    section = next(s for s in view.sections if s.name == "Routing (MoE)")
    logged = {k for _, m in recorder.history for k in m if k.startswith("moe/")}
    assert {k for k in panel_keys(view) if k.startswith("moe/")} == logged
    assert len(section.panels) == 8  # a statistic each; no tokens-per-expert panel: E > EXPERT_KEYS_MAX
    # with 8 experts the layer's counts are logged (tests/training/callbacks/test_spikes.py) and drawn
    few = build_view(dataclasses.replace(shape, moe_experts=8), Target(entity="e", project="p", name="v"))
    (tokens,) = [
        p
        for p in next(s for s in few.sections if s.name == "Routing (MoE)").panels
        if "per expert," in p.title
    ]
    assert list(tokens.y) == [f"moe/block_01/tokens/expert_{e:02d}" for e in range(8)]
    # and each is in docs/architecture.md's metric table and docs/telemetry.md
    from tests.training.test_metric_names_documented import documented

    text = (Path(__file__).resolve().parents[3] / "docs" / "telemetry.md").read_text()
    for key in logged:
        generic = re.sub(r"expert_\d{2}", "expert_{e:02d}", key.replace("block_01", "block_{i:02d}"))
        assert generic in documented(), key
        assert generic.rsplit("/", 1)[1] in text, key
