"""Hydra callbacks: a sweep goes on past a failed job, then exits non-zero naming the failures."""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

log = logging.getLogger("gptlab")


def rank_zero() -> bool:
    """This process is rank 0 (or the only one). Under torchrun or srun every rank runs the sweep; a
    rank other than 0 can end a job before rank 0 has written that job's end to metrics.json."""
    return int(os.environ.get("RANK", os.environ.get("SLURM_PROCID", "0"))) == 0


class ExitNonZeroOnFailedJobs(Callback):
    """After a multirun, read each job's metrics.json; if any failed, print them and exit with 2.

    A job that stopped on a non-finite step is recorded as failed *and* diverged: in an LR grid that
    is the result of a too-high LR, not a failure of the sweep, so it is listed but does not count.
    A job still "running" when the sweep ends was killed outright (SIGKILL, out of memory) before it
    could record an end: it counts as failed (read on rank 0 only: see rank_zero).
    """

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        sweep = Path(config.hydra.sweep.dir)
        failed, diverged = [], []
        for metrics in sorted(sweep.glob("*/metrics.json")):
            try:
                status = json.loads(metrics.read_text())
            except (OSError, json.JSONDecodeError):
                continue
            if status.get("status") == "failed":
                (diverged if status.get("diverged") else failed).append(
                    f"{metrics.parent.name}: {status.get('error')}"
                )
            elif status.get("status") == "running" and rank_zero():
                failed.append(f"{metrics.parent.name}: killed (metrics.json still says running)")
        if diverged:
            log.warning(
                "%d job(s) diverged (a result, not a failure):\n  %s", len(diverged), "\n  ".join(diverged)
            )
        if failed:
            print(
                f"{len(failed)} job(s) of the sweep failed:\n  " + "\n  ".join(failed),
                file=sys.stderr,
            )
            sys.exit(2)


class ResolveSweepWideValues(Callback):
    """Resolve `keys` (default: logger.group) in the sweep's own config before any job starts.

    `${now:...}` is resolved lazily and cached per config object; Hydra copies the sweep config's
    cache into every job's config. Resolving the group here puts its time stamp in that cache, so
    every job of one sweep gets the same group, whatever hydra.sweep.dir is set to.
    """

    def __init__(self, keys: list[str] | None = None) -> None:
        self.keys = list(keys) if keys else ["logger.group"]

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        for key in self.keys:
            try:
                OmegaConf.select(config, key)
            except Exception as err:  # noqa: BLE001 - a value the job cannot resolve fails there, clearly
                log.debug("could not resolve %s in the sweep config: %s", key, err)
