"""The Lightning Trainer a run trains with: the accelerator, devices and precision resolved for this
machine (one clear error for an impossible ask), the callbacks in their order, and the Trainer's
settings. `train` builds it here, and gptlab.bench times the same one."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import lightning as L
import torch

from gptlab.config import TrainConfig
from gptlab.training.cadence import figures_every, lightning_val_check_interval
from gptlab.training.callbacks.final_validation import FinalValidation
from gptlab.training.callbacks.log_step import LogStepIsOptimizerStep
from gptlab.training.callbacks.nonfinite import NonFiniteMonitor
from gptlab.training.callbacks.one_write_checkpoint import OneWriteCheckpoint
from gptlab.training.callbacks.preemption import PreemptionCheckpoint
from gptlab.training.callbacks.progress import LossProgressBar
from gptlab.training.callbacks.rng import RNGStateCheckpoint
from gptlab.training.callbacks.summary import RunSummary
from gptlab.training.callbacks.throughput import LogStepThroughput
from gptlab.training.checkpoint_io import AtomicCheckpointIO
from gptlab.training.strategies import build_strategy


def resolve_devices(cfg: TrainConfig) -> tuple[str, int]:
    """The accelerator and the number of local devices, with one clear error for impossible asks."""
    t = cfg.trainer
    has_gpu = torch.cuda.is_available()
    accelerator = t.accelerator if t.accelerator != "auto" else ("gpu" if has_gpu else "cpu")
    if accelerator not in ("cpu", "gpu", "cuda"):
        raise ValueError(f"trainer.accelerator={t.accelerator!r} is not accepted; choose auto, cpu or gpu")
    if accelerator in ("gpu", "cuda") and not has_gpu:
        raise ValueError("trainer.accelerator=gpu but this machine has no GPU; use trainer.accelerator=cpu")
    available = torch.cuda.device_count() if accelerator != "cpu" else (os.cpu_count() or 1)
    if t.devices == "auto" or t.devices == -1:
        devices = available if accelerator != "cpu" else 1
    elif isinstance(t.devices, int) and not isinstance(t.devices, bool) and t.devices > 0:
        devices = t.devices
    else:
        raise ValueError(f"trainer.devices={t.devices!r} is not accepted; give a positive integer or auto")
    if devices > available:
        what = "GPUs" if accelerator != "cpu" else "CPU cores"
        hint = "" if accelerator != "cpu" or t.accelerator != "auto" else " (no GPU found)"
        raise ValueError(
            f"trainer.devices={devices} but this machine has {available} {what}{hint}; "
            f"accepted: 1..{available}"
        )
    if t.accelerator == "auto" and not has_gpu and devices > 1:
        raise ValueError(
            f"trainer.devices={devices} asks for several devices but no GPU was found; to run "
            f"{devices} CPU processes say so: trainer.accelerator=cpu trainer.devices={devices}"
        )
    return ("cpu" if accelerator == "cpu" else "gpu"), devices


def resolve_precision(cfg: TrainConfig, accelerator: str) -> str:
    """trainer.precision as given; `auto`: bf16-mixed on a GPU that has bf16, else 32-true."""
    if cfg.trainer.precision != "auto":
        return cfg.trainer.precision
    if accelerator == "gpu" and torch.cuda.is_bf16_supported():
        return "bf16-mixed"
    return "32-true"


def task_callbacks(cfg: TrainConfig) -> list[L.Callback]:
    """The downstream-task evaluation when callbacks.tasks.names is not empty (reads task files now)."""
    if not cfg.callbacks.tasks.names:
        return []
    from gptlab.training.callbacks.tasks import TaskEvaluation

    return [TaskEvaluation(cfg.callbacks.tasks)]


def build_callbacks(
    cfg: TrainConfig, run_dir: Path, summary: RunSummary, tasks: list[L.Callback] | None = None
) -> list[L.Callback]:
    """The run's callbacks, in the order their hooks must run (each placement says why); `tasks`:
    task_callbacks(cfg) made earlier (the app makes it first, so a bad task file costs no data
    preparation), else made here."""
    every = cfg.callbacks.telemetry.every_n_steps or cfg.trainer.log_every_n_steps
    callbacks: list[L.Callback] = [
        LogStepIsOptimizerStep(),  # first: a resumed run logs each step at its own index
        summary,
        # before ModelCheckpoint: a bad step stops the run before a checkpoint is written after it
        NonFiniteMonitor(cfg.callbacks.on_nonfinite, every=cfg.trainer.log_every_n_steps),
        LogStepThroughput(every=cfg.trainer.log_every_n_steps),
        FinalValidation(),  # before ModelCheckpoint's own hooks run on that validation
        # scores at validations; RunSummary reads its last results at the end
        *(task_callbacks(cfg) if tasks is None else tasks),
        OneWriteCheckpoint(  # an improving validation writes best.ckpt once; last.ckpt links it
            dirpath=run_dir / "checkpoints",
            filename="best",
            monitor="val/loss",
            mode="min",
            save_top_k=1,
            save_last=True,
            every_n_train_steps=cfg.callbacks.checkpoint_every_n_steps,
            enable_version_counter=False,
        ),
        RNGStateCheckpoint(),  # exact resume: dropout draws continue where the checkpoint was
        PreemptionCheckpoint(run_dir / "checkpoints"),  # SIGTERM: save last.ckpt, then exit
    ]
    if cfg.trainer.enable_progress_bar:
        callbacks.append(LossProgressBar(refresh_rate=cfg.callbacks.progress_refresh_rate))
    if cfg.callbacks.telemetry.enabled:
        from gptlab.training.callbacks.telemetry import LayerTelemetry

        t = cfg.callbacks.telemetry
        callbacks.append(
            LayerTelemetry(
                every=every,
                act_rms=t.act_rms,
                attention=t.attention,
                attention_every=t.attention_every,
                figures=t.figures,
                figures_every=figures_every(t.figures_every, cfg.trainer.max_steps, every),
                run_dir=run_dir,
            )
        )
    if cfg.callbacks.spikes.enabled:  # after telemetry: a spike record reads what it logged
        from gptlab.training.callbacks.spikes import SpikeWatch

        s = cfg.callbacks.spikes
        callbacks.append(
            SpikeWatch(
                run_dir,
                s.threshold,
                s.ema_decay,
                s.warmup_steps,
                s.on_spike,
                s.max_records,
                s.max_consecutive,
            )
        )
    return callbacks


def build_trainer(
    cfg: TrainConfig,
    accelerator: str,
    devices: int,
    run_dir: Path,
    loggers: list[Any],
    callbacks: list[L.Callback],
) -> L.Trainer:
    """The Trainer as `train` runs it (also used by gptlab.bench, so both time the same)."""
    return L.Trainer(
        accelerator=accelerator,
        devices=devices,
        num_nodes=cfg.trainer.num_nodes,
        strategy=build_strategy(cfg.trainer, devices),
        precision=resolve_precision(cfg, accelerator),
        max_steps=cfg.trainer.max_steps,
        # in training batches: the optimizer-step cadence times the micro-batches of a step
        val_check_interval=lightning_val_check_interval(
            cfg.trainer.val_check_interval, cfg.trainer.max_steps, cfg.trainer.accumulate_grad_batches
        ),
        check_val_every_n_epoch=None,
        limit_val_batches=1.0,  # every batch of the val loader: data.val_windows sizes validation
        log_every_n_steps=cfg.trainer.log_every_n_steps,
        accumulate_grad_batches=cfg.trainer.accumulate_grad_batches,
        deterministic=cfg.trainer.deterministic,
        use_distributed_sampler=False,  # the DataModule shards the stream itself
        enable_progress_bar=cfg.trainer.enable_progress_bar,
        enable_model_summary=False,
        logger=loggers or False,
        callbacks=callbacks,
        plugins=[AtomicCheckpointIO()],
        default_root_dir=str(run_dir),
    )
