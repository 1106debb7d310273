"""`hydra/launcher: slurm | submitit_array_local`: a sweep as one submitit job array that resumes.

hydra-submitit-launcher submits every job of a launch call as one array (`executor.map_array`);
the ablation sweeper hands it every job left in one call. What these subclasses add:
- a job re-run in a directory holding its own unfinished run (an array task requeued after
  preemption, or retried) resumes from its `checkpoints/last.ckpt` instead of starting over: the
  same rule as the sweeper's on a re-run of the sweep command (gptlab.ablation.sweep_dir.job_state);
- a job's number is the one the ablation sweeper pinned (`hydra.sweep.subdir=<k>`), so hydra.job.num
  and the directory agree when finished jobs leave gaps;
- a job's DDP ranks (trainer.devices > 1 outside srun) start as `train.py`, not as submitit's
  own entry point;
- a job that fails comes back as a failed result instead of raising in the sweep while the rest of
  the array runs, so the sweep still writes its report and lists the failure.
The optional extra `gptlab[slurm]` installs hydra-submitit-launcher; without it these launchers are
not registered and `hydra/launcher=slurm` says what to install.
"""

import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra.core.utils import JobReturn, JobStatus

log = logging.getLogger(__name__)

try:
    from hydra_plugins.hydra_submitit_launcher.submitit_launcher import LocalLauncher, SlurmLauncher
except ImportError:  # the `slurm` extra is not installed
    LocalLauncher = SlurmLauncher = None  # type: ignore[assignment,misc]


def _resume_overrides(launcher: Any, overrides: list[str], job_num: int) -> tuple[list[str], int]:
    from gptlab.ablation.sweep_dir import RESUME, job_state
    from hydra_plugins.gptlab_launchers.slots_launcher import literal_subdir

    pinned = literal_subdir(overrides)
    num = job_num if pinned is None else pinned
    from omegaconf import open_dict

    cfg = launcher.hydra_context.config_loader.load_sweep_config(launcher.config, overrides)
    with open_dict(cfg):
        cfg.hydra.job.num = num
    job_dir = Path(str(cfg.hydra.sweep.dir)) / str(cfg.hydra.sweep.subdir)
    state, ckpt = job_state(job_dir)
    if state == RESUME and not any(o.startswith("ckpt_path=") for o in overrides):
        # a warning: Hydra has not configured the job's logging yet, and submitit keeps stderr
        log.warning("job %d: its directory holds an unfinished run; resuming from %s", num, ckpt)
        overrides = [*overrides, f"ckpt_path='{ckpt}'"]
    return overrides, num


class _ArrayMixin:
    entry: list[str] | None = None

    def __call__(
        self, sweep_overrides: list[str], job_dir_key: str, job_num: int, job_id: str, singleton_state: Any
    ) -> JobReturn:
        from hydra.core.singleton import Singleton
        from hydra.core.utils import setup_globals

        Singleton.set_state(singleton_state)
        setup_globals()
        if self.entry:
            os.environ.setdefault("GPTLAB_ENTRY", json.dumps(self.entry))
        overrides, num = _resume_overrides(self, list(sweep_overrides), job_num)
        return super().__call__(overrides, job_dir_key, num, job_id, singleton_state)  # type: ignore[misc]

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        from gptlab.launcher.pool import entry_command

        self.entry = entry_command()
        return _launch_collecting_failures(self, job_overrides, initial_job_idx)


def _launch_collecting_failures(
    launcher: Any, job_overrides: Sequence[Sequence[str]], initial_job_idx: int
) -> list[JobReturn]:
    """hydra-submitit-launcher's launch, except that waiting on a job that failed (raised, was
    preempted, timed out) gives a failed JobReturn rather than raising before the others are read."""
    import submitit
    from hydra.core.singleton import Singleton
    from hydra.core.utils import filter_overrides
    from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf
    from omegaconf import OmegaConf

    params = dict(launcher.params)
    init_keys = {"submitit_folder", "max_num_timeout"}
    init = {"folder": params["submitit_folder"]}
    if "max_num_timeout" in params:
        init[f"{launcher._EXECUTOR}_max_num_timeout"] = params["max_num_timeout"]
    executor = submitit.AutoExecutor(cluster=launcher._EXECUTOR, **init)
    base = set(OmegaConf.structured(BaseQueueConf).keys())
    specific = {(k if k in base else f"{launcher._EXECUTOR}_{k}"): v for k, v in params.items()}
    executor.update_parameters(**{k: v for k, v in specific.items() if k not in init_keys})
    Path(str(launcher.config.hydra.sweep.dir)).mkdir(parents=True, exist_ok=True)
    job_params = []
    for i, overrides in enumerate(job_overrides):
        idx = initial_job_idx + i
        log.info("\t#%d : %s", idx, " ".join(filter_overrides(overrides)))
        state = Singleton.get_state()
        job_params.append((list(overrides), "hydra.sweep.dir", idx, f"job_id_for_{idx}", state))
    jobs = executor.map_array(launcher, *zip(*job_params, strict=True))
    log.info("submitted %d jobs as one array (%s)", len(jobs), jobs[0].job_id.split("_")[0] if jobs else "-")
    _watch(launcher, jobs, job_overrides, [p[2] for p in job_params], params.get("array_parallelism"))
    returns = []
    for job, overrides in zip(jobs, job_overrides, strict=True):
        try:
            returns.append(job.results()[0])
        except Exception as err:  # noqa: BLE001 - one job's failure is its own result
            ret = JobReturn(overrides=list(overrides))
            ret.status, ret.return_value = JobStatus.FAILED, RuntimeError(" ".join(str(err).split())[-500:])
            returns.append(ret)
    return returns


def _watch(launcher: Any, jobs: list[Any], overrides: Any, nums: list[int], parallel: Any) -> None:
    """One status line per task start and end until the array is done (gptlab.launcher.progress)."""
    from gptlab.launcher.progress import SweepProgress, watch_array
    from hydra_plugins.gptlab_launchers.slots_launcher import literal_subdir

    nums = [
        n if literal_subdir(o) is None else literal_subdir(o) for n, o in zip(nums, overrides, strict=True)
    ]
    sweep_dir = Path(str(launcher.config.hydra.sweep.dir))
    watch_array(jobs, nums, SweepProgress(sweep_dir, nums, int(parallel or len(jobs))))


if SlurmLauncher is not None:

    class SlurmArrayLauncher(_ArrayMixin, SlurmLauncher):  # type: ignore[misc,valid-type]
        """SLURM: every job left as one array, array_parallelism at a time; requeued tasks resume."""

    class LocalArrayLauncher(_ArrayMixin, LocalLauncher):  # type: ignore[misc,valid-type]
        """submitit's local executor (real subprocesses, all jobs at once): the SLURM path on one machine."""
