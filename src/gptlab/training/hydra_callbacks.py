"""Hydra callbacks: a sweep goes on past a failed job, then exits non-zero naming the failures."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

log = logging.getLogger("gptlab")


class ExitNonZeroOnFailedJobs(Callback):
    """After a multirun, read each job's metrics.json; if any failed, print them and exit with 2."""

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        sweep = Path(config.hydra.sweep.dir)
        failed = []
        for metrics in sorted(sweep.glob("*/metrics.json")):
            try:
                status = json.loads(metrics.read_text())
            except (OSError, json.JSONDecodeError):
                continue
            if status.get("status") == "failed":
                failed.append(f"{metrics.parent.name}: {status.get('error')}")
        if failed:
            print(
                f"{len(failed)} job(s) of the sweep failed:\n  " + "\n  ".join(failed),
                file=sys.stderr,
            )
            sys.exit(2)
