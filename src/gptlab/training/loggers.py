"""WandbLogger (offline unless configured) and CSVLogger, with a fallback that never stops training.

A resumed run (ckpt_path given) in a directory that already holds a run keeps both records whole:
its wandb run continues under the same id (resume="allow", one curve on the dashboard), and
csv/metrics.csv goes on from the earlier attempt's rows (those before the first step the resumed run
logs; the steps it re-runs replace theirs). Lightning's CSVLogger would delete the earlier file: it
is kept as it was, as csv/metrics.part-N.csv.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from lightning.pytorch.loggers import CSVLogger, Logger, WandbLogger
from lightning.pytorch.loggers.csv_logs import ExperimentWriter

from gptlab.config import LoggerConfig

log = logging.getLogger(__name__)
WANDB_MODES = ("offline", "online", "disabled")


def previous_wandb_id(run_dir: Path) -> str | None:
    """The id of the newest wandb run in `run_dir` (online or offline), read from its run file."""
    files = sorted((run_dir / "wandb").glob("*run-*/run-*.wandb"), key=lambda p: p.stat().st_mtime)
    return files[-1].stem.removeprefix("run-") if files else None


def keep_csv_part(run_dir: Path) -> Path | None:
    """Move an earlier attempt's csv/metrics.csv to metrics.part-N.csv (N = 0, 1, ...)."""
    current = run_dir / "csv" / "metrics.csv"
    if not current.is_file():
        return None
    n = len(list(current.parent.glob("metrics.part-*.csv")))
    kept = current.with_name(f"metrics.part-{n}.csv")
    current.rename(kept)
    return kept


def earlier_rows(part: Path) -> list[dict[str, str]]:
    """The rows of an earlier attempt's CSV log; a row cut short by a kill (fewer cells) is dropped."""
    import csv

    with part.open(newline="") as f:
        reader = csv.DictReader(f)
        return [r for r in reader if None not in r and None not in r.values() and r.get("step")]


class ContinuingWriter(ExperimentWriter):
    """Lightning's CSV writer, whose first save writes the earlier attempt's rows first: those before
    the first step logged now (a step run again after the resume replaces its old rows)."""

    def __init__(self, log_dir: str, earlier: list[dict[str, str]]) -> None:
        super().__init__(log_dir)
        self.earlier: list[dict[str, str]] | None = earlier

    def save(self) -> None:
        if self.earlier is not None and self.metrics:
            first = min(int(m["step"]) for m in self.metrics)
            self.metrics = [r for r in self.earlier if int(float(r["step"])) < first] + self.metrics
            self.earlier = None
        super().save()


class ContinuingCSVLogger(CSVLogger):
    """CSVLogger whose metrics.csv continues an earlier attempt's (kept as metrics.part-N.csv)."""

    def __init__(self, save_dir: str, earlier: list[dict[str, str]]) -> None:
        super().__init__(save_dir=save_dir, name="csv", version="")
        self._earlier = earlier

    @property
    def experiment(self) -> ExperimentWriter:
        if self._experiment is None:
            self._fs.makedirs(self.root_dir, exist_ok=True)
            self._experiment = ContinuingWriter(self.log_dir, self._earlier)
        return self._experiment


def csv_logger(run_dir: Path, kept: Path | None) -> CSVLogger:
    if kept is None:
        return CSVLogger(save_dir=str(run_dir), name="csv", version="")
    return ContinuingCSVLogger(str(run_dir), earlier_rows(kept))


def ablation_fields(lr: float, seed: int, overrides: list[str], arm_key: str | None) -> dict[str, Any]:
    """Top-level run-config keys a wandb grouped plot or parallel-coordinates view reads directly:
    the arm (the value of the sweep's arm key in this job's overrides), the peak LR and the seed."""
    fields: dict[str, Any] = {"lr": lr, "seed": seed}
    if arm_key:
        value = next(
            (o.split("=", 1)[1] for o in overrides if o.split("=", 1)[0].lstrip("+~") == arm_key), None
        )
        fields.update(arm=value, arm_key=arm_key)
    return fields


def _wandb(
    cfg: LoggerConfig, run_dir: Path, name: str, config: dict[str, Any], mode: str, run_id: str | None = None
) -> WandbLogger:
    import wandb

    resume = {"id": run_id, "resume": "allow"} if run_id else {}
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
        **resume,
    )
    return logger


def build_loggers(
    cfg: LoggerConfig, run_dir: Path, name: str, config: dict[str, Any], rank: int, resume: bool = False
) -> list[Logger]:
    """CSV always works; wandb that cannot start (no network, no key) falls back to offline, then off.
    `resume`: this run continues from a checkpoint; an earlier run in run_dir is continued."""
    if cfg.mode not in WANDB_MODES:
        raise ValueError(f"logger.mode={cfg.mode!r} is not accepted; choose one of {WANDB_MODES}")
    run_id = previous_wandb_id(run_dir) if resume else None
    kept = keep_csv_part(run_dir) if resume and rank == 0 else None
    loggers: list[Logger] = []
    if cfg.csv:
        loggers.append(csv_logger(run_dir, kept))
    if cfg.wandb and cfg.mode != "disabled":
        os.environ.setdefault("WANDB_SILENT", "true")
        mode = cfg.mode
        if mode == "online" and not os.environ.get("WANDB_API_KEY") and not _has_netrc_key():
            log.warning("wandb: no API key found; logging offline instead (sync later with `wandb sync`)")
            mode = "offline"
        try:
            logger = _wandb(cfg, run_dir, name, config, mode, run_id)
            if rank == 0:
                _ = logger.experiment  # start the run now so a failure is caught here
            loggers.append(logger)
        except Exception as err:  # noqa: BLE001 - any wandb failure must not stop training
            if mode == "online":
                log.warning("wandb online failed (%s); logging offline instead", str(err).splitlines()[0])
                try:
                    logger = _wandb(cfg, run_dir, name, config, "offline", run_id)
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
                loggers.append(csv_logger(run_dir, kept))
    return loggers


def _has_netrc_key() -> bool:
    netrc = Path.home() / ".netrc"
    return netrc.exists() and "api.wandb.ai" in netrc.read_text(errors="ignore")


def log_lineage(loggers: list[Logger], lineage: dict[str, Any]) -> None:
    """A trunk's branch points or a branch's trunk and step into the CSV log's hparams.yaml (wandb
    has them in its run config): the CSV's record of where the run sits in its trunk."""
    for logger in loggers:
        if lineage and isinstance(logger, CSVLogger):
            logger.log_hyperparams(lineage)


def finish_wandb(loggers: list[Logger]) -> None:
    """End the wandb run so the next job of a multirun starts a run of its own."""
    for logger in loggers:
        if isinstance(logger, WandbLogger) and logger._experiment is not None:
            logger.experiment.finish()
