"""`experiment=ablate_attn_switches`: each arm turns on one attention switch of issue 46 and nothing
else (the base arm is GPTConfig's own defaults), and the quick sibling runs end to end with the gate
and the sink in its report."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from gptlab.compose import compose_with_hydra
from gptlab.model import GPTConfig
from tests.cli_here import train_py_run_here
from tests.conftest import QUICK_ENV

SWITCHES = ("attn_gate", "window", "window_pattern", "nope_every", "attn_softcap", "logit_softcap")
ON = {  # what each arm should set, written from the issue (Qiu et al.; Gemma 2; Llama 4), not the yaml
    "base": {},
    "gated": {"attn_gate": "elementwise"},
    "local_global": {"window": 16, "window_pattern": "SSSL"},
    "nope4": {"nope_every": 4},
    "softcap": {"attn_softcap": 50.0, "logit_softcap": 30.0},
}


def _model(arm: str) -> dict:
    cfg = compose_with_hydra(["experiment=ablate_attn_switches", f"model/attn_variant={arm}"])
    return OmegaConf.to_container(cfg.model, resolve=True)  # type: ignore[return-value]


def test_each_arm_sets_its_switch_and_nothing_else() -> None:
    defaults = {f.name: f.default for f in dataclasses.fields(GPTConfig) if f.name in SWITCHES}
    models = {arm: _model(arm) for arm in ON}
    base = models["base"]
    assert {k: base[k] for k in SWITCHES} == defaults  # base is the plain model
    for arm, on in ON.items():
        assert {k: models[arm][k] for k in SWITCHES} == {**defaults, **on}, arm
        rest = {k: v for k, v in models[arm].items() if k not in SWITCHES}
        assert rest == {k: v for k, v in base.items() if k not in SWITCHES}, arm
    assert base["n_layer"] == 4 and base["block_size"] == 64  # SSSL: 3 local layers of 16, 1 global


def test_full_preset_keeps_the_attention_telemetry_on() -> None:
    cfg = compose_with_hydra(["experiment=ablate_attn_switches"])
    tel = cfg.callbacks.telemetry
    assert tel.enabled and tel.attention  # the sink and the gate are read from it
    steps = cfg.trainer.log_every_n_steps * tel.attention_every
    assert cfg.trainer.max_steps // steps >= 3  # several attention steps in a run


@pytest.mark.slow
def test_quick_preset_runs_and_reports_the_gate_and_the_sink(tmp_path: Path) -> None:
    """`python train.py -m experiment=ablate_attn_switches_quick`: 8 jobs of base and gated, the
    gated − base row, and the sink table with the gate's mean only on the gated arm."""
    out = tmp_path / "sweep"
    proc = train_py_run_here(  # its jobs one after another in this process (tests/cli_here.py)
        "-m", "experiment=ablate_attn_switches_quick", f"hydra.sweep.dir={out}",
        f"data.cache_dir={tmp_path / 'cache'}", "logger=csv", env=QUICK_ENV,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = (out / "report.md").read_text()
    assert "8 job(s): 8 finished" in report and "| `gated` | `base` |" in report
    sink = report.split("#### Attention sink by block")[1].split("\n#")[0]
    rows = {line.split("|")[1].strip(): line for line in sink.splitlines() if line.startswith("| `")}
    assert set(rows) == {"`base`", "`gated`"}
    assert rows["`base`"].rstrip(" |").endswith("—") and not rows["`gated`"].rstrip(" |").endswith("—")
    statuses = {json.loads((out / str(k) / "metrics.json").read_text())["status"] for k in range(8)}
    assert statuses == {"finished"}
    for k, gate in ((0, "none"), (2, "elementwise")):  # job order: seed, arm, LR
        ckpt = torch.load(out / str(k) / "checkpoints" / "last.ckpt", weights_only=True)
        assert ckpt["hyper_parameters"]["model"]["attn_gate"] == gate
