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
import signal
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydra.core.config_store import ConfigStore
from hydra.core.utils import JobReturn, JobStatus

log = logging.getLogger(__name__)

try:
    from hydra_plugins.hydra_submitit_launcher.config import SlurmQueueConf
    from hydra_plugins.hydra_submitit_launcher.submitit_launcher import LocalLauncher, SlurmLauncher
except ImportError:  # the `slurm` extra is not installed
    LocalLauncher = SlurmLauncher = SlurmQueueConf = None  # type: ignore[assignment,misc]

if SlurmQueueConf is not None:

    @dataclass
    class SlurmArrayConf(SlurmQueueConf):  # type: ignore[misc,valid-type]
        """hydra-submitit-launcher's fields, and two it has no field for (conf/hydra/launcher/slurm.yaml)."""

        _target_: str = "hydra_plugins.gptlab_launchers.submitit_array.SlurmArrayLauncher"
        requeue: bool = True  # `#SBATCH --requeue`: needed by scontrol requeue where JobRequeue=0
        wckey: str | None = None  # `#SBATCH --wckey`, only where the cluster uses workload keys

    ConfigStore.instance().store(
        group="hydra/launcher", name="gptlab_slurm", node=SlurmArrayConf, provider="gptlab"
    )


def _resume_overrides(launcher: Any, overrides: list[str], job_num: int) -> tuple[list[str], int, Path]:
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
    return overrides, num, job_dir


def _status(job_dir: Path) -> str | None:
    from gptlab.ablation.sweep_dir import read_metrics

    return read_metrics(job_dir).get("status")


class RequeueSignalAsSigterm:
    """Inside an array task: SIGUSR2 (SLURM's `--signal=USR2@<s>` before the time limit, or a
    preemption) stops the run as SIGTERM does: it finishes its step, saves checkpoints/last.ckpt and
    records "preempted". Only then does submitit's own USR2 handler run (resubmit this call and
    `scontrol requeue`), so the requeued task resumes from that step, not from the last periodic
    checkpoint. submitit alone would requeue at once from inside the training step, saving nothing.
    A signal before training starts is turned into a SIGTERM that submitit's handler ignores: the
    run goes on (nothing to save yet) and SLURM's kill at the time limit ends it."""

    def __init__(self) -> None:
        self.received: tuple[int, Any] | None = None
        self._submitit: Any = None

    def __enter__(self) -> "RequeueSignalAsSigterm":
        self._submitit = signal.getsignal(signal.SIGUSR2)
        if callable(self._submitit):  # only under submitit: it installed its requeue handler
            signal.signal(signal.SIGUSR2, self._on_signal)
        return self

    def __exit__(self, *exc: object) -> None:
        if callable(self._submitit):
            signal.signal(signal.SIGUSR2, self._submitit)

    def _on_signal(self, signum: int, frame: Any) -> None:
        log.warning("SIGUSR2: stopping at the next step boundary to save last.ckpt, then requeueing")
        self.received = (signum, frame)
        os.kill(os.getpid(), signal.SIGTERM)  # Lightning's handler: stop after this step

    def hand_to_submitit(self) -> None:
        assert self.received is not None and callable(self._submitit)
        self._submitit(*self.received)


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
        overrides, num, job_dir = _resume_overrides(self, list(sweep_overrides), job_num)
        with RequeueSignalAsSigterm() as requeue:
            try:
                ret = super().__call__(overrides, job_dir_key, num, job_id, singleton_state)  # type: ignore[misc]
            except SystemExit:  # the run stopped on the SIGTERM that USR2 became (exit 143)
                if not requeue.received:
                    raise
                ret = None
        if requeue.received and _status(job_dir) == "preempted":
            requeue.hand_to_submitit()  # resubmits this call, `scontrol requeue`, exits the task
        if ret is None:
            raise RuntimeError(f"job {num}: stopped by SIGUSR2 but not requeued ({_status(job_dir)})")
        return ret

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        from gptlab.launcher.pool import entry_command

        self.entry = entry_command()
        return _launch_collecting_failures(self, job_overrides, initial_job_idx)


def executor_parameters(
    params: dict[str, Any], executor: str, base_keys: set[str], accelerator: str | None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(AutoExecutor's init arguments, update_parameters' arguments) from the launcher's fields.

    submitit takes `max_num_timeout` at init, the rest through update_parameters with the executor's
    prefix (`slurm_partition`) except the shared fields (`timeout_min`); the init keys are taken out
    by their own names first (prefixed, `slurm_max_num_timeout` is refused by update_parameters).
    On SLURM: `requeue` becomes `#SBATCH --requeue` (scontrol requeue needs it where the cluster's
    JobRequeue default is 0), no GPUs are asked for a CPU job, and `wckey` is written only when set."""
    params = dict(params)
    init: dict[str, Any] = {"folder": params.pop("submitit_folder")}
    if "max_num_timeout" in params:
        init[f"{executor}_max_num_timeout"] = params.pop("max_num_timeout")
    if executor == "slurm":
        extra = dict(params.get("additional_parameters") or {})
        if params.pop("requeue", False):
            extra.setdefault("requeue", True)
        params["additional_parameters"] = extra
        if accelerator == "cpu":
            params["gpus_per_node"] = None
    update = {(k if k in base_keys else f"{executor}_{k}"): v for k, v in params.items()}
    return init, update


def _launch_collecting_failures(
    launcher: Any, job_overrides: Sequence[Sequence[str]], initial_job_idx: int
) -> list[JobReturn]:
    """hydra-submitit-launcher's launch, except that waiting on a job that failed (raised, was
    killed, timed out) gives a failed JobReturn with its reason rather than raising before the others
    are read."""
    import submitit
    from hydra.core.singleton import Singleton
    from hydra.core.utils import filter_overrides
    from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf
    from omegaconf import OmegaConf

    base = set(OmegaConf.structured(BaseQueueConf).keys())
    accelerator = OmegaConf.select(launcher.config, "trainer.accelerator", default=None)
    init, update = executor_parameters(dict(launcher.params), launcher._EXECUTOR, base, accelerator)
    executor = submitit.AutoExecutor(cluster=launcher._EXECUTOR, **init)
    executor.update_parameters(**update)  # (AutoExecutor drops None values: unset, not "none")
    if launcher._EXECUTOR == "slurm" and update.get("slurm_wckey") is None:
        executor._executor.parameters["wckey"] = None  # else submitit's default: --wckey=submitit
    Path(str(launcher.config.hydra.sweep.dir)).mkdir(parents=True, exist_ok=True)
    job_params = []
    for i, overrides in enumerate(job_overrides):
        idx = initial_job_idx + i
        log.info("\t#%d : %s", idx, " ".join(filter_overrides(overrides)))
        state = Singleton.get_state()
        job_params.append((list(overrides), "hydra.sweep.dir", idx, f"job_id_for_{idx}", state))
    jobs = executor.map_array(launcher, *zip(*job_params, strict=True))
    log.info("submitted %d jobs as one array (%s)", len(jobs), jobs[0].job_id.split("_")[0] if jobs else "-")
    nums, parallel = [p[2] for p in job_params], launcher.params.get("array_parallelism")
    _watch(launcher, jobs, job_overrides, nums, parallel)
    returns = []
    for job, overrides in zip(jobs, job_overrides, strict=True):
        # _watch read each done task's result, waiting submitit's _results_timeout_s (15 s, for a
        # slow shared filesystem) for the pickle a killed task never writes: no second wait here
        job._results_timeout_s = 0
        try:
            returns.append(job.results()[0])
        except Exception as err:  # noqa: BLE001 - one job's failure is its own result
            ret = JobReturn(overrides=list(overrides))
            ret.status, ret.return_value = JobStatus.FAILED, RuntimeError(failure_reason(job, err))
            returns.append(ret)
    return returns


def failure_reason(job: Any, err: BaseException) -> str:
    """Why an array task gave no result: the signal that killed it (sacct's ExitCode `0:9` on SLURM,
    the process's return code locally), else the end of the error submitit read from its stderr."""
    tail = " ".join(str(err).split())[-400:]
    killed = killing_signal(job)
    if killed is None:
        return tail
    signum, source = killed
    try:
        name = signal.Signals(signum).name
    except ValueError:  # not a signal number this platform names
        name = str(signum)
    return f"killed by signal {signum} ({name}; {source}); last output: {tail[-200:]}"


def killing_signal(job: Any) -> tuple[int, str] | None:
    """(signal, where it was read) for a task ended by a signal, None otherwise or when unknown."""
    process = getattr(job, "_process", None)  # submitit's local executor keeps the Popen
    if process is not None and process.poll() is not None:
        code = process.returncode
        return (-code, f"return code {code}") if code < 0 else None
    if type(job).__name__ != "SlurmJob":
        return None
    try:
        out = subprocess.run(
            ["sacct", "-j", str(job.job_id), "-o", "JobID,State,ExitCode", "--parsable2", "--noheader"],
            capture_output=True, text=True, timeout=60, check=True,
        ).stdout  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    for line in out.splitlines():  # the task's line, then its steps' (<id>.batch, <id>.0, ...)
        fields = line.split("|")
        if len(fields) != 3 or fields[0].split(".")[0] != str(job.job_id):
            continue
        state, code = fields[1], fields[2]
        status, _, sig = code.partition(":")
        if sig.isdigit() and int(sig) > 0:  # ExitCode is <exit status>:<signal>
            return int(sig), f"sacct: {state} {code}"
        if status.isdigit() and int(status) > 128:  # a shell's 128 + n: its command got signal n
            return int(status) - 128, f"sacct: {state} {code}"
    return None


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
