"""Dashboards: telemetry keys plotted against the optimizer step in wandb (offline, the real client),
heat maps re-drawn and re-logged during the run, not only at its end."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import lightning as L
import pytest
import torch
from lightning.pytorch.loggers import WandbLogger
from torch.utils.data import DataLoader

from gptlab.config import OptimConfig
from gptlab.model import GPTConfig
from gptlab.training.callbacks.telemetry import PREFIXES, LayerTelemetry
from gptlab.training.module import GPTLightningModule


class SeenImages(L.Callback):
    """Which image keys the logger had received by the end of each step (before fit ends)."""

    def __init__(self, logged: list[tuple[str, int]]) -> None:
        self.logged, self.by_step = logged, {}

    def on_train_batch_end(
        self, trainer: L.Trainer, pl_module: Any, outputs: Any, batch: Any, i: int
    ) -> None:
        self.by_step[trainer.global_step - 1] = len(self.logged)


@pytest.mark.slow
def test_define_metric_per_prefix_and_heatmaps_during_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    logger = WandbLogger(project="gptlab-test", save_dir=str(tmp_path), offline=True)
    defined: list[tuple[str, Any]] = []
    run = logger.experiment
    original = run.define_metric

    def record(name: str, *args: Any, **kwargs: Any) -> Any:
        defined.append((name, kwargs.get("step_metric")))
        return original(name, *args, **kwargs)

    monkeypatch.setattr(run, "define_metric", record)
    images: list[tuple[str, int]] = []
    log_image = logger.log_image

    def record_image(key: str, images_: list[Any], step: int | None = None, **kwargs: Any) -> None:
        images.append((key, step))
        log_image(key=key, images=images_, step=step, **kwargs)

    monkeypatch.setattr(
        logger, "log_image", lambda key, images, step=None, **k: record_image(key, images, step, **k)
    )
    L.seed_everything(0, verbose=False)
    cfg = GPTConfig(vocab_size=64, block_size=16, n_layer=2, n_head=2, n_embd=32)
    module = GPTLightningModule(
        model=dataclasses.asdict(cfg), optim=dataclasses.asdict(OptimConfig(warmup_steps=1))
    )
    telemetry = LayerTelemetry(every=1, figures=True, figures_every=2, run_dir=tmp_path / "run")
    seen = SeenImages(images)
    data = torch.randint(0, 64, (5 * 2, 17), generator=torch.Generator().manual_seed(0))
    trainer = L.Trainer(
        accelerator="cpu",
        max_steps=5,
        log_every_n_steps=1,
        logger=logger,
        callbacks=[telemetry, seen],
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        limit_val_batches=0,
        num_sanity_val_steps=0,
        default_root_dir=str(tmp_path),
    )
    try:
        trainer.fit(module, train_dataloaders=DataLoader(list(data), batch_size=2))
    finally:
        import wandb

        wandb.finish()
    for prefix in PREFIXES:
        assert (f"{prefix}/*", "trainer/global_step") in defined, (prefix, defined)
    # log steps 0..4, figures every 2 log steps: drawn after steps 1 and 3, while training runs
    keys = {k for k, _ in images}
    assert {"telemetry/grad_norm_heatmap", "telemetry/attn_logit_max_heatmap"} <= keys, keys
    assert seen.by_step[1] > 0 and seen.by_step[3] > seen.by_step[1], seen.by_step
    assert {s for _, s in images} >= {1, 3}
    for name in ("grad_norm_heatmap", "attn_logit_max_heatmap", "grad_norm_depth_profile"):
        assert (tmp_path / "run" / "figures" / f"{name}.png").stat().st_size > 0
