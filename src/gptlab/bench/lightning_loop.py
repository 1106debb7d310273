"""The path users run, timed: our LightningModule and TokenDataModule under the Trainer and default
callbacks of `gptlab.training.trainer` (what `gptlab.training.app` trains with), with layer telemetry
off or logging every n steps."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import warnings
from collections.abc import Iterator
from pathlib import Path

import lightning as L
import torch

from gptlab.bench.timing import HookClock, StepTimer, Timing, timing
from gptlab.config import TrainConfig
from gptlab.data.datamodule import TokenDataModule
from gptlab.model import GPTConfig


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Lightning's banners, warnings and the progress bar go to /dev/null (the bar still renders:
    its cost is measured, minus the terminal's)."""
    names = ("lightning.pytorch", "lightning.fabric", "lightning")
    levels = {n: logging.getLogger(n).level for n in names}
    with (
        open(os.devnull, "w") as null,
        contextlib.redirect_stdout(null),  # TQDMProgressBar writes to stdout
        contextlib.redirect_stderr(null),
        warnings.catch_warnings(),
    ):
        warnings.simplefilter("ignore")
        for n in names:
            logging.getLogger(n).setLevel(logging.ERROR)
        try:
            yield
        finally:
            for n, level in levels.items():
                logging.getLogger(n).setLevel(level)


def lightning_run(
    cfg: TrainConfig,
    model_cfg: GPTConfig,
    device: torch.device,
    accelerator: str,
    telemetry_every: int | None,
    warmup: int,
    steps: int,
    run_dir: Path,
    extra: list[L.Callback] | None = None,
) -> Timing:
    """Our LightningModule + TokenDataModule + app's Trainer and default callbacks, timed per step
    (`extra` callbacks go before the timer: gptlab.bench.gpu_check's probes)."""
    from gptlab.data.spec import tokenizer_spec
    from gptlab.training.callbacks.summary import RunSummary
    from gptlab.training.callbacks.telemetry import LayerTelemetry
    from gptlab.training.loggers import build_loggers, finish_wandb
    from gptlab.training.module import GPTLightningModule
    from gptlab.training.trainer import build_callbacks, build_trainer

    t = cfg.callbacks.telemetry
    telemetry = dataclasses.replace(
        t, enabled=telemetry_every is not None, every_n_steps=telemetry_every, figures=False
    )
    trainer_cfg = dataclasses.replace(
        cfg.trainer,
        max_steps=warmup + steps,
        val_check_interval=warmup + steps,
    )
    cfg = dataclasses.replace(
        cfg,
        trainer=trainer_cfg,
        callbacks=dataclasses.replace(cfg.callbacks, telemetry=telemetry),
    )
    L.seed_everything(cfg.seed, workers=True, verbose=False)
    dm = TokenDataModule(cfg.data, block_size=model_cfg.block_size, seed=cfg.seed)
    dm.prepare()
    module = GPTLightningModule(
        model=dataclasses.asdict(model_cfg),
        optim=dataclasses.asdict(cfg.optim),
        bytes_per_token=dm.bytes_per_token,
        compile=bool(cfg.compile),
        fsdp=dataclasses.asdict(cfg.trainer.fsdp) if cfg.trainer.strategy == "fsdp" else None,
        tokenizer=tokenizer_spec(dm.tokenizer),
    )
    loggers = build_loggers(cfg.logger, run_dir, "bench", {"bench": True}, 0)
    callbacks = build_callbacks(cfg, run_dir, RunSummary(run_dir))
    telemetry_cb = [c for c in callbacks if isinstance(c, LayerTelemetry)]
    hooks = HookClock(telemetry_cb[0], device) if telemetry_cb else None
    timer = StepTimer(device, warmup, steps, hooks)
    callbacks = [*callbacks, *(extra or []), timer]
    trainer = build_trainer(cfg, accelerator, 1, run_dir, loggers, callbacks)
    trainer.limit_val_batches = 0  # no validation inside the timed window (Lightning reads it at fit)
    try:
        trainer.fit(module, datamodule=dm)
    finally:
        finish_wandb(loggers)
    return timing(timer.stamps, timer.marks, warmup, steps)
