"""No host read of a tensor on the training hot path outside log steps (Lightning path, defaults).

On a GPU each `.item()`, `float(t)`, `.tolist()` … of a device tensor, and each `torch.tensor(x,
device=...)` (a blocking host-to-device copy), stalls the host until the device catches up. A CPU
has no such stall, so this test spies on the calls themselves while the real Trainer, module and
default callbacks train a tiny model, and fails on any that happens on a step that is not a log step.
"""

from __future__ import annotations

import collections
import dataclasses
import traceback
from pathlib import Path
from typing import Any

import lightning as L
import pytest
from torch.overrides import TorchFunctionMode

from gptlab.bench.options import compose
from gptlab.data.datamodule import TokenDataModule
from gptlab.training.app import model_config
from gptlab.training.callbacks.summary import RunSummary
from gptlab.training.loggers import build_loggers
from gptlab.training.module import GPTLightningModule
from gptlab.training.trainer import build_callbacks, build_trainer

HOST_READS = {"item", "tolist", "__float__", "__int__", "__bool__", "__index__", "numpy", "cpu"}
# Host reads of tensors that live on the CPU whatever the accelerator, or that only run on a CPU:
CPU_ONLY = (
    "torch/optim/",  # non-fused AdamW reads its CPU step counter; on CUDA it is fused (device steps)
    "gptlab/data/",  # the sampler's permutation is a CPU tensor
    "gptlab/training/callbacks/nonfinite.py",  # reads its flags every step only when device is cpu
    "gptlab/training/callbacks/spikes.py",  # reads the loss every step only on a CPU (pinned copy on GPU)
)
LOG_EVERY = 5
STEPS = 12


class HostReadSpy(TorchFunctionMode):
    """Records host reads (and device-targeted tensor construction) per training step."""

    def __init__(self) -> None:
        super().__init__()
        self.step: int | None = None
        self.seen: dict[int, list[str]] = collections.defaultdict(list)

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if self.step is not None and (name in HOST_READS or (name == "tensor" and "device" in kwargs)):
            frames = [f for f in traceback.extract_stack()[:-1] if "overrides.py" not in f.filename]
            where = frames[-1].filename
            if not any(part in where for part in CPU_ONLY):
                self.seen[self.step].append(f"{name} at {where}:{frames[-1].lineno}")
        return func(*args, **kwargs)


class MarkStep(L.Callback):
    def __init__(self, spy: HostReadSpy) -> None:
        self.spy = spy

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: Any, batch: Any, i: int) -> None:
        self.spy.step = i


@pytest.mark.parametrize("extra", [[], ["model/ffn=moe", "model.moe.n_experts=4", "model.moe.balance=bias"]])
def test_no_host_reads_outside_log_steps(tmp_path: Path, cache_dir: Path, extra: list[str]) -> None:
    """The defaults, and model/ffn=moe (routing sums kept on the device, read on log steps only)."""
    cfg = compose(
        [
            *extra,
            "model.n_layer=1",
            "model.n_embd=32",
            "model.n_head=2",
            "model.block_size=32",
            "data.batch_size=2",
            "data.max_bytes=100000",
            f"data.cache_dir={cache_dir}",
            f"trainer.max_steps={STEPS}",
            f"trainer.log_every_n_steps={LOG_EVERY}",
            f"callbacks.progress_refresh_rate={LOG_EVERY}",
            f"trainer.val_check_interval={STEPS}",
            "trainer.enable_progress_bar=true",
            "trainer.accelerator=cpu",
            "callbacks.telemetry.figures=false",
        ]
    )
    assert cfg.callbacks.telemetry.enabled  # the defaults: telemetry on, every log step
    dm = TokenDataModule(cfg.data, block_size=cfg.model.block_size, seed=cfg.seed)
    dm.prepare()
    module = GPTLightningModule(
        model=dataclasses.asdict(model_config(cfg, dm.vocab_size)),
        optim=dataclasses.asdict(cfg.optim),
        bytes_per_token=dm.bytes_per_token,
    )
    spy = HostReadSpy()
    callbacks = [MarkStep(spy), *build_callbacks(cfg, tmp_path, RunSummary(tmp_path))]  # first
    loggers = build_loggers(cfg.logger, tmp_path, "hot-path", {}, 0)
    trainer = build_trainer(cfg, "cpu", 1, tmp_path, loggers, callbacks)
    trainer.limit_val_batches = 0  # no validation: its reads are not the training hot path
    with spy:
        trainer.fit(module, datamodule=dm)
    assert trainer.global_step == STEPS

    # log steps (batch i with (i+1) % LOG_EVERY == 0), the first step (lazy set-up) and the last
    allowed = {0, STEPS - 1} | {i for i in range(STEPS) if (i + 1) % LOG_EVERY == 0}
    assert any(spy.seen[i] for i in allowed), "the spy saw nothing at all: it is not working"
    offending = {i: spy.seen[i] for i in range(STEPS) if i not in allowed and spy.seen[i]}
    assert not offending, f"host reads on non-log steps: {offending}"
