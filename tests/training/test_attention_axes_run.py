"""Each attention switch of issue 46 trains (4 steps), its telemetry is logged and finite; a bad
value exits 2 with one line.

The documented commands run in this process on the config train.py composes from them (plus tiny
sizes: tests/training/rel_harness.py), as one process each would: nothing in them is about the
command line, which the bad value's test goes through."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from gptlab.compose import compose_config
from gptlab.model import GPTConfig
from tests.conftest import column, read_csv_metrics, run_script
from tests.training.rel_harness import train_here

QUICK = ["trainer.max_steps=4", "trainer.val_check_interval=4", "callbacks.telemetry.attention_every=1"]
LAYERS = 2  # rel_harness.TINY's model.n_layer

RUNS = {  # the documented commands (docs/architecture.md, "Attention axes"), as written
    "gate": ["model.attn_gate=headwise"],
    "nope": ["model.pos_emb=none"],
    "partial": ["model.rope_fraction=0.5"],
    "caps": ["model.attn_softcap=50", "model.logit_softcap=30"],
}


@pytest.mark.slow
@pytest.mark.parametrize("name", RUNS)
def test_train_py_trains_each_attention_switch(name: str, tmp_path: Path, cache: Path) -> None:
    """Finishes with a finite validation loss, the checkpoint's config holds the switch, and every
    block's attention sink (and, gated, the gate's mean, in (0, 1)) is logged."""
    run = tmp_path / "run"
    summary = train_here(run, cache, *RUNS[name], *QUICK)
    assert summary["status"] == "finished" and math.isfinite(summary["final_val_loss"])
    model = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)["hyper_parameters"]["model"]
    for override in RUNS[name]:
        key, value = override.removeprefix("model.").split("=")
        assert str(model[key]) in (value, f"{value}.0"), (key, model[key])
    assert model["n_layer"] == LAYERS
    rows = read_csv_metrics(run)
    for i in range(LAYERS):
        sink = column(rows, f"attn_sink/block_{i:02d}")
        assert len(sink) == 4 and all(0 <= v <= 1 for _, v in sink), sink
        gate = column(rows, f"attn_gate/block_{i:02d}")
        assert (len(gate) == 4 and all(0 < v < 1 for _, v in gate)) if name == "gate" else not gate
    assert not column(rows, f"attn_sink/block_{LAYERS:02d}")
    if name == "caps":
        assert all(v <= 30 for _, v in column(rows, "logits/max"))


@pytest.mark.slow
def test_train_py_refuses_a_bad_rope_fraction_in_one_line(tmp_path: Path) -> None:
    proc = run_script("train.py", "model.rope_fraction=1.5", f"hydra.run.dir={tmp_path / 'run'}")
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == (
        "error: model.rope_fraction=1.5 is not accepted; give a number in (0, 1]"
    )


def test_documented_bad_input_rows_are_the_messages_given() -> None:
    """docs/bad-inputs.md's attention rows: each `tried` override, composed as train.py composes
    it, is refused with the row's exact line (the export row is tested in tests/export)."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "bad-inputs.md").read_text()
    section = text.split("### Attention axes", 1)[1].split("\n### ", 1)[0]
    rows = [r for r in section.splitlines() if r.startswith("| ") and "`error: " in r and "export" not in r]
    assert len(rows) == 7
    for row in rows:
        tried, line = (cell.strip().strip("`") for cell in row.split(" | ")[1:3])
        with pytest.raises(ValueError) as err:
            cfg = compose_config(tried.split())
            GPTConfig.from_dict(OmegaConf.to_container(cfg.model))  # type: ignore[arg-type]
        assert f"error: {err.value}" == line
