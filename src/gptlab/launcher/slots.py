"""How many jobs of a sweep run at once on this node, and what each one gets.

Pure arithmetic over what the launcher found (GPUs visible, cores, each job's trainer.devices), so
the rules can be tested without GPUs. A slot is a place for one job: on a GPU node a disjoint set of
`trainer.devices` GPUs (the job sees only those, through CUDA_VISIBLE_DEVICES), on CPU a share of
the cores (torch threads = cores ÷ slots ÷ processes per job), and everywhere its own rendezvous
port, so two DDP jobs side by side never meet in one process group.
"""

from __future__ import annotations

from dataclasses import dataclass

AUTO = "auto"


class SlotError(ValueError):
    """A launcher setting that cannot work on this node: one line naming it and what is accepted."""


@dataclass(frozen=True)
class Slot:
    index: int
    gpus: tuple[str, ...]  # GPU ids as CUDA_VISIBLE_DEVICES names them; empty on CPU
    threads: int  # torch / OpenMP threads for each process of the job
    port: int  # MASTER_PORT for the job's local ranks


@dataclass(frozen=True)
class JobNeeds:
    """What one job asks of the node: GPUs or CPU processes, and how many (trainer.devices)."""

    on_gpu: bool
    devices: int


def _count(name: str, value: object, allow_auto: bool = True) -> int | None:
    if allow_auto and value == AUTO:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        accepted = "auto or an integer >= 1" if allow_auto else "an integer >= 1"
        raise SlotError(f"hydra.launcher.{name}={value!r} is not accepted; give {accepted}")
    return value


def plan_slots(
    slots: object,
    needs: list[JobNeeds],
    gpus: list[str],
    cores: int,
    threads: object = AUTO,
    ports: list[int] | None = None,
) -> list[Slot]:
    """The slots for these jobs.

    slots: `auto` or N. Auto fills the node: on GPUs, GPUs ÷ devices per job (8 GPUs, devices=2:
    4 slots), because a sweep that keeps 7 of 8 GPUs idle is the thing to avoid; on CPU, 1 (a job
    keeps every core, as a serial sweep does: a CPU user asks for more with slots=N).
    gpus: the GPU ids to share out (CUDA_VISIBLE_DEVICES's order when it is set).
    threads: per process; `auto` = cores ÷ (slots × devices), at least 1.
    """
    if not needs:
        return []
    asked = _count("slots", slots)
    on_gpu = any(n.on_gpu for n in needs)
    per_job = max(n.devices for n in needs)
    if on_gpu:
        if not gpus:
            raise SlotError(
                "the jobs ask for GPUs (trainer.accelerator) but none is visible; "
                "run them on CPU with trainer.accelerator=cpu"
            )
        if per_job > len(gpus):
            raise SlotError(
                f"trainer.devices={per_job} is larger than the {len(gpus)} GPU(s) this node gives the "
                f"sweep ({','.join(gpus)}); give trainer.devices <= {len(gpus)}"
            )
        fit = len(gpus) // per_job
        n = fit if asked is None else asked
        if n > fit:
            raise SlotError(
                f"hydra.launcher.slots={n} with trainer.devices={per_job} needs {n * per_job} GPUs; this "
                f"node gives the sweep {len(gpus)}: give slots <= {fit} (or slots=auto)"
            )
    else:
        n = 1 if asked is None else asked
    n = min(n, len(needs))  # no idle slots: 3 jobs never take 8 slots' worth of threads
    fixed_threads = _count("threads", threads)
    per_process = fixed_threads or max(1, cores // (n * per_job))
    ports = ports or [0] * n
    if len(ports) < n:
        raise SlotError(f"{n} slots need {n} rendezvous ports, {len(ports)} were given")
    return [
        Slot(
            index=i,
            gpus=tuple(gpus[i * per_job : (i + 1) * per_job]) if on_gpu else (),
            threads=per_process,
            port=ports[i],
        )
        for i in range(n)
    ]


def slot_env(slot: Slot) -> dict[str, str]:
    """The environment a job's processes start with in this slot."""
    env = {
        "OMP_NUM_THREADS": str(slot.threads),
        "MKL_NUM_THREADS": str(slot.threads),
        "GPTLAB_SLOT": str(slot.index),
    }
    if slot.port:
        env["GPTLAB_MASTER_PORT"] = str(slot.port)
    if slot.gpus:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(slot.gpus)
    return env
