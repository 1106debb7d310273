"""model.init_from takes the checkpoint's architecture: an attention switch the user turned on that the
checkpoint lacks (or holds at another value) is refused in one line, never dropped silently."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gptlab.config import TrainConfig
from gptlab.data.tokenizers import ByteTokenizer
from gptlab.export import export_hf
from gptlab.model import GPTConfig
from gptlab.training.app import model_config
from tests.interop.helpers import perturbed_gpt

REPO = Path(__file__).resolve().parents[2]
SANDWICH: dict[str, Any] = dict(norm_placement="sandwich", ffn="geglu", attn_softcap=50.0, logit_softcap=30.0)


def exported(tmp_path: Path, overrides: dict[str, Any]) -> Path:
    return Path(export_hf(perturbed_gpt(overrides), tmp_path / "hf"))


@pytest.mark.parametrize(
    ("switch", "shown"),
    [
        ({"attn_softcap": 30.0}, "model.attn_softcap=30.0 (checkpoint: None)"),
        ({"logit_softcap": 15.0}, "model.logit_softcap=15.0 (checkpoint: None)"),
        ({"attn_gate": "headwise"}, "model.attn_gate='headwise' (checkpoint: 'none')"),
    ],
)
def test_a_switch_the_llama_checkpoint_lacks_is_refused(tmp_path: Path, switch: dict, shown: str) -> None:
    hf = exported(tmp_path, {})
    cfg = TrainConfig(model=GPTConfig(init_from=str(hf), **switch))
    with pytest.raises(ValueError) as err:
        model_config(cfg, 256, ByteTokenizer())
    assert shown in str(err.value) and "accepted: these fields left at their defaults" in str(err.value)


def test_gemma2_caps_are_taken_from_the_checkpoint_and_a_different_cap_is_refused(tmp_path: Path) -> None:
    hf = exported(tmp_path, SANDWICH)
    got = model_config(TrainConfig(model=GPTConfig(init_from=str(hf))), 256, ByteTokenizer())
    assert (got.attn_softcap, got.logit_softcap) == (50.0, 30.0)  # defaults: the checkpoint's caps
    same = TrainConfig(model=GPTConfig(init_from=str(hf), attn_softcap=50.0))
    assert model_config(same, 256, ByteTokenizer()).attn_softcap == 50.0
    other = TrainConfig(model=GPTConfig(init_from=str(hf), attn_softcap=20.0))
    with pytest.raises(ValueError, match=r"model.attn_softcap=20.0 \(checkpoint: 50.0\)"):
        model_config(other, 256, ByteTokenizer())


def test_the_refusal_is_the_line_docs_bad_inputs_shows(tmp_path: Path) -> None:
    rows = (REPO / "docs" / "bad-inputs.md").read_text().splitlines()
    row = next(r for r in rows if "test_init_from_switches" in r)
    shown = row.split("| `error: ")[1].split("` |")[0]
    hf = exported(tmp_path, {})
    with pytest.raises(ValueError) as err:
        model_config(TrainConfig(model=GPTConfig(init_from=str(hf), attn_softcap=30.0)), 256, ByteTokenizer())
    assert str(err.value) == shown.replace("<dir>", str(hf))
