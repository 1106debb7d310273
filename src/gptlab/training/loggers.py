"""WandbLogger (offline unless configured) and CSVLogger, with a fallback that never stops training."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from lightning.pytorch.loggers import CSVLogger, Logger, WandbLogger

from gptlab.config import LoggerConfig

log = logging.getLogger(__name__)
WANDB_MODES = ("offline", "online", "disabled")


def _wandb(cfg: LoggerConfig, run_dir: Path, name: str, config: dict[str, Any], mode: str) -> WandbLogger:
    import wandb

    logger = WandbLogger(
        project=cfg.project,
        entity=cfg.entity,
        name=name,
        group=cfg.group,
        tags=list(cfg.tags),
        save_dir=str(run_dir),
        offline=mode == "offline",
        mode=mode,
        config=config,
        settings=wandb.Settings(init_timeout=30),
    )
    return logger


def build_loggers(
    cfg: LoggerConfig, run_dir: Path, name: str, config: dict[str, Any], rank: int
) -> list[Logger]:
    """CSV always works; wandb that cannot start (no network, no key) falls back to offline, then off."""
    if cfg.mode not in WANDB_MODES:
        raise ValueError(f"logger.mode={cfg.mode!r} is not accepted; choose one of {WANDB_MODES}")
    loggers: list[Logger] = []
    if cfg.csv:
        loggers.append(CSVLogger(save_dir=str(run_dir), name="csv", version=""))
    if cfg.wandb and cfg.mode != "disabled":
        os.environ.setdefault("WANDB_SILENT", "true")
        mode = cfg.mode
        if mode == "online" and not os.environ.get("WANDB_API_KEY") and not _has_netrc_key():
            log.warning("wandb: no API key found; logging offline instead (sync later with `wandb sync`)")
            mode = "offline"
        try:
            logger = _wandb(cfg, run_dir, name, config, mode)
            if rank == 0:
                _ = logger.experiment  # start the run now so a failure is caught here
            loggers.append(logger)
        except Exception as err:  # noqa: BLE001 - any wandb failure must not stop training
            if mode == "online":
                log.warning("wandb online failed (%s); logging offline instead", str(err).splitlines()[0])
                try:
                    logger = _wandb(cfg, run_dir, name, config, "offline")
                    if rank == 0:
                        _ = logger.experiment
                    loggers.append(logger)
                    return loggers
                except Exception as err2:  # noqa: BLE001
                    err = err2
            log.warning(
                "wandb could not start (%s); metrics go to the CSV log only",
                str(err).splitlines()[0],
            )
            if not cfg.csv:
                loggers.append(CSVLogger(save_dir=str(run_dir), name="csv", version=""))
    return loggers


def _has_netrc_key() -> bool:
    netrc = Path.home() / ".netrc"
    return netrc.exists() and "api.wandb.ai" in netrc.read_text(errors="ignore")


def finish_wandb(loggers: list[Logger]) -> None:
    """End the wandb run so the next job of a multirun starts a run of its own."""
    for logger in loggers:
        if isinstance(logger, WandbLogger) and logger._experiment is not None:
            logger.experiment.finish()
