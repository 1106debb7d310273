"""One output directory per launch, the same in every process of it.

Hydra resolves `${now:...}` in each process. A job started by torchrun or srun has one process per
rank, and each would pick its own timestamp (its own run or sweep directory). `${launch_id:<default>}`
names the directory after the launcher's job instead: torchrun's rendezvous id, else SLURM's job id
(and step, so two `srun`s of one batch script differ, while a requeued job finds its old directory
and Lightning resumes from its `hpc_ckpt_*.ckpt` there). Elsewhere it is `<default>`.
"""

from __future__ import annotations

import os
import re

from omegaconf import OmegaConf

RESOLVER = "launch_id"


def launch_id(default: str) -> str:
    """`torchrun-<rdzv id>` | `slurm-<job id>.<step id>` | default (a timestamp)."""
    run_id = os.environ.get("TORCHELASTIC_RUN_ID", "")
    if run_id and run_id != "none":  # torchrun's default --rdzv-id is the literal "none"
        return "torchrun-" + _safe(run_id)
    job = os.environ.get("SLURM_ARRAY_JOB_ID")
    job = f"{job}_{os.environ.get('SLURM_ARRAY_TASK_ID', '0')}" if job else os.environ.get("SLURM_JOB_ID")
    step = os.environ.get("SLURM_STEP_ID", os.environ.get("SLURM_STEPID"))
    if job and step is not None:  # a job step (srun); a plain salloc shell keeps the timestamp
        return f"slurm-{_safe(job)}.{_safe(step)}"
    return default


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", text)


def register_resolver() -> None:
    """Make `${launch_id:...}` available to the config tree (idempotent)."""
    if not OmegaConf.has_resolver(RESOLVER):
        OmegaConf.register_new_resolver(RESOLVER, launch_id)
