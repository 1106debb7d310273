"""model.window/window_pattern and data.document_mask train (4 steps); the documented bad inputs are
refused with their exact line.

The documented commands run in this process on the config train.py composes from them (plus tiny
sizes: tests/training/rel_harness.py), as one process each would: nothing in them is about the
command line."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from gptlab.compose import compose_config
from gptlab.data.config import DataConfig
from gptlab.data.documents import check_documents, document_spec
from gptlab.data.tokenizers.byte import BYTE_EOS
from tests.training.rel_harness import train_here

# block 64 (TINY's is 32): the documented window of 32 then masks, it is not the whole block
QUICK = ["trainer.max_steps=4", "trainer.val_check_interval=4", "model.block_size=64"]

RUNS = {  # the documented commands (docs/architecture.md, "Attention axes"), as written
    "windows": ["model.window=32", "model.window_pattern=SSSL"],
    "documents": ["data.document_mask=true"],
}


@pytest.mark.slow
@pytest.mark.parametrize("name", RUNS)
def test_train_py_trains_windows_and_document_masks(name: str, tmp_path: Path, cache: Path) -> None:
    """Finishes with a finite validation loss; the checkpoint records the window or the eot id."""
    run = tmp_path / "run"
    summary = train_here(run, cache, *RUNS[name], *QUICK)
    assert summary["status"] == "finished" and math.isfinite(summary["final_val_loss"])
    hp = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)["hyper_parameters"]
    if name == "windows":
        assert (hp["model"]["window"], hp["model"]["window_pattern"]) == (32, "SSSL")
    else:  # the byte tokenizer's eot
        assert hp["documents"] == {"eot": BYTE_EOS, "positions": "restart"}


def rows() -> list[tuple[str, str]]:
    text = (Path(__file__).resolve().parents[2] / "docs" / "bad-inputs.md").read_text()
    section = text.split("### Windows and document masks", 1)[1].split("\n### ", 1)[0]
    out = [r for r in section.splitlines() if r.startswith("| ") and "`error: " in r]
    return [tuple(c.strip().strip("`") for c in r.split(" | ")[1:3]) for r in out]  # type: ignore[misc]


def test_documented_bad_input_rows_are_the_messages_given() -> None:
    """Each model/data row's `tried`, composed as train.py composes it, gives the row's line; the
    tokenizer row through document_spec with no eot id; the export row is tested in tests/export."""
    found = rows()
    assert len(found) == 7
    for tried, line in found:
        if "export" in tried:
            continue
        with pytest.raises(ValueError) as err:
            if "such a tokenizer" in tried:
                document_spec(DataConfig(document_mask=True), None, "<name>")
            else:
                cfg = compose_config(tried.split())  # builds the GPTConfig, which checks the model
                check_documents(cfg.data)
        assert f"error: {err.value}" == line
