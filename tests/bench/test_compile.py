"""compile=true: compiled blocks match eager, and the Lightning path compiles them in configure_model.

The full grid (4 placements × swiglu/gelu) takes minutes on a 2-core CPU: dev/bench/compile_parity.py
runs it (see docs/performance.md); here one combination.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from dev.bench.compile_parity import compile_parity
from gptlab.bench.lightning_loop import lightning_run
from gptlab.bench.options import compose
from gptlab.data.datamodule import TokenDataModule
from gptlab.training.app import model_config


@pytest.mark.slow
def test_compiled_blocks_match_eager_and_train_under_lightning(tmp_path: Path, cache_dir: Path) -> None:
    r = compile_parity("pre", "swiglu")
    assert r["compiled_blocks"] == r["n_layer"] == 2
    assert r["loss_diff"] < 1e-4
    assert r["max_rel_grad_diff"] < 1e-4

    cfg = compose(
        [
            "model.n_layer=2",
            "model.n_embd=32",
            "model.n_head=2",
            "model.block_size=16",
            "data.batch_size=2",
            "data.max_bytes=100000",
            f"data.cache_dir={cache_dir}",
            "trainer.accelerator=cpu",
            "trainer.enable_progress_bar=false",
            "compile=true",
        ]
    )
    dm = TokenDataModule(cfg.data, block_size=cfg.model.block_size, seed=cfg.seed)
    dm.prepare()
    seen = []
    original = torch.nn.Module.compile

    def spy(self: torch.nn.Module, *args, **kwargs) -> None:
        seen.append(type(self).__name__)
        original(self, *args, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(torch.nn.Module, "compile", spy)
        timing = lightning_run(
            cfg, model_config(cfg, dm.vocab_size), torch.device("cpu"), "cpu", None, 1, 1, tmp_path
        )
    assert seen == ["Block", "Block"]  # configure_model → parallelize → compile_blocks
    assert len(timing.step_times) == 1 and timing.window > 0
