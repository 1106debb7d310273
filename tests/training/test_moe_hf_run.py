"""docs/moe.md's Hugging Face chain, as documented plus tiny sizes: train an OLMoE-shaped MoE, export it
with scripts/export.py (transformers' OlmoeForCausalLM gives the checkpoint's logits), and start a
`model/ffn=moe model.init_from=<the export>` run from exactly those weights."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lightning as L
import pytest
import torch
from transformers import AutoModelForCausalLM

from gptlab.checkpoints import load_gpt
from gptlab.export import gpt_from_hf
from tests.export.test_hf import export_cli
from tests.training.rel_harness import train_here, with_callbacks

OLMOE_RUN = ("model/ffn=moe", "model.qk_norm=true", "model.qk_norm_scope=full", "model.moe.norm_topk=false")
TINY_MOE = (
    "model.moe.n_experts=4",
    "model.moe.expert_hidden=32",
    "trainer.max_steps=2",
    "trainer.val_check_interval=2",
)


class FirstWeights(L.Callback):
    """The model's weights as training starts (after model.init_from has filled them)."""

    state: dict[str, torch.Tensor] | None = None

    def on_train_start(self, trainer: L.Trainer, pl_module: Any) -> None:
        self.state = {k: v.detach().clone() for k, v in pl_module.model.state_dict().items()}


@pytest.mark.slow
def test_documented_moe_export_chain(tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = tmp_path / "olmoe-demo"
    assert train_here(run, cache, *OLMOE_RUN, *TINY_MOE)["status"] == "finished"
    ckpt = run / "checkpoints" / "last.ckpt"
    out = run / "hf"
    assert export_cli().main([f"ckpt_path={ckpt}", f"out_dir={out}"]) == 0
    hf = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32).eval()
    assert type(hf).__name__ == "OlmoeForCausalLM" and (out / "tokenizer.json").is_file()
    trained = load_gpt(ckpt)
    idx = torch.randint(0, trained.cfg.vocab_size, (2, 24), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        torch.testing.assert_close(hf(idx).logits, trained(idx), rtol=0, atol=1e-5)

    first = FirstWeights()
    with_callbacks(monkeypatch, first)
    ft = tmp_path / "olmoe-demo-ft"
    assert (
        train_here(ft, cache, "model/ffn=moe", f"model.init_from={out}", *TINY_MOE[2:])["status"]
        == "finished"
    )
    assert first.state is not None
    want = gpt_from_hf(out).state_dict()
    assert set(first.state) == set(want)
    for name, tensor in want.items():
        torch.testing.assert_close(first.state[name], tensor, rtol=0, atol=0, msg=name)
