"""metrics.json before Lightning: its atomic writer, and the record of a refused config.

train.py checks the composed config here first (`checked`: OmegaConf.to_object, where every config
dataclass validates itself), before `gptlab.training.app` imports Lightning: a refused command line
then costs Python, Hydra and torch, not Lightning's import (4.4 of a run's 6.4 CPU s of imports,
docs/performance.md). A refusal is recorded the same way here and in `app.run_job`: metrics.json
`failed` with the one-line error and the job's overrides, then exit 2 for a single run, or the error
logged and NaN returned for a multirun job (the sweep goes on).
"""

from __future__ import annotations

import json
import logging
import math
import os
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from gptlab.config import TrainConfig
from gptlab.errors import USER_ERRORS, exit_with, one_line
from gptlab.training.job_identity import job_overrides

log = logging.getLogger(__name__)
# the variables Lightning's rank_zero_only reads for this process's rank, in its order
RANK_VARS = ("RANK", "LOCAL_RANK", "SLURM_PROCID", "JSM_NAMESPACE_RANK")


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    """Write JSON to a temporary name and rename: a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str) + "\n")
    os.replace(tmp, path)


def rank_zero() -> bool:
    """This process is rank 0 (or alone), as Lightning's rank_zero_only decides it."""
    rank = next((os.environ[v] for v in RANK_VARS if v in os.environ), "0")
    return int(rank) == 0


def validate(cfg: DictConfig) -> TrainConfig:
    """Turn the composed DictConfig into typed dataclasses; GPTConfig validates itself."""
    return OmegaConf.to_object(cfg)  # type: ignore[return-value]


def refuse(err: BaseException, run_dir: Path, multirun: bool) -> float:
    """Record a user error in metrics.json, then exit 2 (a single run) or return NaN (a sweep's job)."""
    if rank_zero():
        failed = {"status": "failed", "error": one_line(err), "overrides": job_overrides()}
        write_json_atomic(run_dir / "metrics.json", failed)
    if not multirun:
        exit_with(err)
    log.error(one_line(err))
    return math.nan


def checked(raw: DictConfig) -> TrainConfig | None:
    """The typed config, or None once refused (a multirun job; a single run has exited 2)."""
    try:
        return validate(raw)
    except USER_ERRORS as err:
        hydra_cfg = HydraConfig.get()
        refuse(err, Path(hydra_cfg.runtime.output_dir), hydra_cfg.mode == RunMode.MULTIRUN)
        return None
