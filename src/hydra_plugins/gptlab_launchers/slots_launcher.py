"""`hydra/launcher: slots`: the jobs of a sweep side by side on one node, each on its own resources.

gptlab's default launcher. With one slot (a CPU machine, or a GPU node whose jobs each need every
GPU) it is Hydra's basic launcher: jobs run one after another in this process. With N slots each job
runs in a process of its own (gptlab.launcher.pool) with a disjoint set of GPUs, cores ÷ N threads
and its own rendezvous port. The rules are in gptlab.launcher.slots; this module is the thin plugin.
Hydra imports every plugin module at start-up: nothing heavy at import time.
"""

# No `from __future__ import annotations`: Hydra's plugin scanner runs this module before it is in
# sys.modules, and dataclasses cannot resolve string annotations then.
import logging
import os
import shutil
import socket
import sys
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydra._internal.core_plugins.basic_launcher import BasicLauncher
from hydra.core.config_store import ConfigStore
from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus, configure_log, filter_overrides, setup_globals
from omegaconf import DictConfig, OmegaConf, open_dict

log = logging.getLogger(__name__)


@dataclass
class SlotsLauncherConf:
    _target_: str = "hydra_plugins.gptlab_launchers.slots_launcher.SlotsLauncher"
    slots: Any = "auto"  # jobs at once; auto: GPUs ÷ trainer.devices on a GPU node, 1 on CPU
    gpus: Any = "auto"  # the GPU ids to share out; auto: CUDA_VISIBLE_DEVICES, else every GPU
    threads: Any = "auto"  # torch threads per process; auto: cores ÷ (slots × trainer.devices)
    stop_timeout_s: float = 120.0  # after Ctrl-C / SIGTERM, how long jobs get to checkpoint
    preload: str = "gptlab.training.app"  # what a slot's worker imports before its first job


ConfigStore.instance().store(group="hydra/launcher", name="slots", node=SlotsLauncherConf, provider="gptlab")


def fail(message: str) -> None:
    """One line on stderr, exit 2: a launcher setting that cannot work; no job was started."""
    print(f"error: {' '.join(message.split())}", file=sys.stderr, flush=True)
    sys.exit(2)


def visible_gpus(setting: Any) -> list[str]:
    """The GPU ids to share out: the setting's list, else CUDA_VISIBLE_DEVICES, else torch's count."""
    if setting != "auto":
        if isinstance(setting, str | int):
            setting = [setting]
        return [str(g) for g in setting]
    given = os.environ.get("CUDA_VISIBLE_DEVICES")
    if given is not None:
        return [g.strip() for g in given.split(",") if g.strip() and g.strip() != "-1"]
    if not Path("/proc/driver/nvidia/gpus").is_dir() and not shutil.which("nvidia-smi"):
        return []  # no NVIDIA driver: no need to import torch (1.5 s) in the sweep process to learn it
    import torch

    return [str(i) for i in range(torch.cuda.device_count())] if torch.cuda.is_available() else []


def job_needs(config: DictConfig, n_gpus: int) -> Any:
    """What one composed job asks for: GPUs or CPU processes, and trainer.devices of them."""
    from gptlab.launcher.slots import JobNeeds

    accelerator = str(OmegaConf.select(config, "trainer.accelerator", default="auto"))
    devices = OmegaConf.select(config, "trainer.devices", default=1)
    on_gpu = accelerator in ("gpu", "cuda") or (accelerator == "auto" and n_gpus > 0)
    if devices in ("auto", -1, "-1"):
        devices = n_gpus if on_gpu else 1
    return JobNeeds(on_gpu, int(devices) if str(devices).isdigit() else 1)


def ranks_launched_outside() -> bool:
    """torchrun (LOCAL_RANK, TORCHELASTIC_RUN_ID) or srun with several tasks started this process as
    one rank of many: a sweep then runs in every rank, one job at a time."""
    env = os.environ
    tasks = env.get("SLURM_NTASKS", "1")
    return "LOCAL_RANK" in env or "TORCHELASTIC_RUN_ID" in env or (tasks.isdigit() and int(tasks) > 1)


def free_ports(n: int) -> list[int]:
    """n distinct free ports, held open together while they are chosen so none repeats."""
    with ExitStack() as stack:
        socks = [stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) for _ in range(n)]
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]


def literal_subdir(overrides: Sequence[str]) -> int | None:
    """The job number an ablation sweeper gave a job (`hydra.sweep.subdir=<k>`), if any."""
    for o in overrides:
        key, _, value = o.partition("=")
        if key == "hydra.sweep.subdir" and value.isdigit():
            return int(value)
    return None


class SlotsLauncher(BasicLauncher):
    def __init__(
        self,
        slots: Any = "auto",
        gpus: Any = "auto",
        threads: Any = "auto",
        stop_timeout_s: float = 120.0,
        preload: str = "gptlab.training.app",
    ) -> None:
        super().__init__()
        self.slots_setting, self.gpus_setting, self.threads = slots, gpus, threads
        self.stop_timeout_s, self.preload = float(stop_timeout_s), str(preload or "")
        self._checked: dict[tuple[str, ...], DictConfig] = {}

    def _compose(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> list[DictConfig]:
        configs = []
        for i, overrides in enumerate(job_overrides):
            cfg = self._checked.pop(tuple(overrides), None)  # composed by check_jobs a moment ago
            if cfg is None:
                cfg = self.hydra_context.config_loader.load_sweep_config(self.config, list(overrides))
            num = literal_subdir(overrides)
            num = initial_job_idx + i if num is None else num
            with open_dict(cfg):
                cfg.hydra.job.id = num
                cfg.hydra.job.num = num
            configs.append(cfg)
        return configs

    def plan(self, configs: list[DictConfig]) -> list[Any]:
        """The slots for these jobs; SlotError (one line) when the settings cannot work here."""
        from gptlab.launcher.slots import Slot, plan_slots

        if ranks_launched_outside():
            # torchrun / srun started this sweep once per rank: every rank runs the whole sweep, job by
            # job, as one process group (docs/multinode.md); slots would split the ranks' jobs apart
            if self.slots_setting not in ("auto", 1):
                log.warning("hydra.launcher.slots ignored: this sweep runs once per torchrun/srun rank")
            return [Slot(index=0, gpus=(), threads=0, port=0)]  # the serial path, in this process

        gpus = visible_gpus(self.gpus_setting)
        needs = [job_needs(c, len(gpus)) for c in configs]
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        slots = plan_slots(self.slots_setting, needs, gpus, cores, self.threads)
        if len(slots) > 1:
            slots = plan_slots(self.slots_setting, needs, gpus, cores, self.threads, free_ports(len(slots)))
        return slots

    def check_jobs(self, job_overrides: Sequence[Sequence[str]]) -> None:
        """Refuse impossible settings before a sweep writes anything (the ablation sweeper calls it)."""
        from gptlab.launcher.slots import SlotError

        configs = self._compose(job_overrides, 0)
        try:
            self.plan(configs)
        except SlotError as err:
            fail(str(err))
        self._checked = {tuple(o): c for o, c in zip(job_overrides, configs, strict=True)}

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        from gptlab.launcher.pool import Task, run_in_slots
        from gptlab.launcher.progress import SweepProgress
        from gptlab.launcher.slots import SlotError

        setup_globals()
        configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        configs = self._compose(job_overrides, initial_job_idx)
        try:
            slots = self.plan(configs)
        except SlotError as err:
            fail(str(err))
        if len(slots) <= 1:
            return self._serial(job_overrides, configs)
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        where = ", ".join(
            f"slot {s.index}: "
            + (f"GPU {','.join(s.gpus)}" if s.gpus else f"{s.threads} thread(s)")
            + f", port {s.port}"
            for s in slots
        )
        log.info("Launching %d jobs in %d slots side by side (%s)", len(configs), len(slots), where)
        singletons = Singleton.get_state()
        tasks = []
        for cfg in configs:
            OmegaConf.select(cfg, "logger.group", default=None)  # resolve ${now} here, once for all
            str(cfg.hydra.sweep.dir)
            payload = dict(
                hydra_context=self.hydra_context,
                task_function=self.task_function,
                config=cfg,
                singletons=singletons,
            )
            tasks.append(Task(int(cfg.hydra.job.num), payload))

        progress = SweepProgress(sweep_dir, [t.num for t in tasks], len(slots))

        def started(task: Any, slot: Any) -> None:
            log.info(
                "\t#%d (slot %d) : %s",
                task.num,
                slot.index,
                " ".join(filter_overrides(job_overrides[tasks.index(task)])),
            )
            progress.started(task.num)

        try:
            outcomes = run_in_slots(
                tasks, slots, sweep_dir / ".slots", self.stop_timeout_s, on_start=started,
                preload=self.preload, on_end=lambda out: progress.ended(out.num, out.status == "completed"),
            )  # fmt: skip
        finally:
            progress.close()
        returns = []
        for overrides, cfg, out in zip(job_overrides, configs, outcomes, strict=True):
            ret = JobReturn(
                overrides=list(overrides), working_dir=os.getcwd(), task_name=str(cfg.hydra.job.name)
            )
            ret.hydra_cfg = cfg
            if out.status == "completed":
                ret.status, ret.return_value = JobStatus.COMPLETED, out.value
            else:
                ret.status, ret.return_value = JobStatus.FAILED, out.error
                log.error("job %d failed: %s", out.num, out.error)
            returns.append(ret)
        return returns

    def _serial(self, job_overrides: Sequence[Sequence[str]], configs: list[DictConfig]) -> list[JobReturn]:
        """One slot: Hydra's basic launcher, each job in this process (its composed config kept)."""
        from hydra.core.utils import run_job

        from gptlab.launcher.progress import SweepProgress

        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        progress = SweepProgress(sweep_dir, [int(c.hydra.job.num) for c in configs], 1)
        if self.threads != "auto":
            import torch

            torch.set_num_threads(int(self.threads))
        runs = []
        for overrides, cfg in zip(job_overrides, configs, strict=True):
            log.info("\t#%d : %s", int(cfg.hydra.job.num), " ".join(filter_overrides(overrides)))
            progress.started(int(cfg.hydra.job.num))
            ret = run_job(
                hydra_context=self.hydra_context,
                task_function=self.task_function,
                config=cfg,
                job_dir_key="hydra.sweep.dir",
                job_subdir_key="hydra.sweep.subdir",
            )
            runs.append(ret)
            configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
            progress.ended(int(cfg.hydra.job.num), ret.status == JobStatus.COMPLETED)
        progress.close()
        return runs
