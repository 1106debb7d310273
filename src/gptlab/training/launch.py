"""Start the local worker processes of a multi-device run from inside one Hydra job.

Lightning's own launcher re-runs `sys.argv` in each child. Under `-m` that argv holds the whole sweep,
so every child would start a sweep of its own (Lightning issue 11300). Here the job that Hydra started
becomes local rank 0 and starts ranks 1..n-1 itself with *this job's* overrides only, pointed at this
job's output directory. Lightning then sees LOCAL_RANK in the environment and launches nothing more.
Under torchrun or SLURM the processes already exist (LOCAL_RANK / SLURM variables), so nothing is spawned.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time

from lightning.fabric.plugins.environments import SLURMEnvironment, TorchElasticEnvironment

log = logging.getLogger(__name__)


def externally_launched() -> bool:
    """True when torchrun, SLURM (srun) or a parent gptlab process already created the ranks."""
    return "LOCAL_RANK" in os.environ or TorchElasticEnvironment.detect() or SLURMEnvironment.detect()


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rendezvous_port() -> int:
    """The port of this job's process group: the one its launcher slot reserved (GPTLAB_MASTER_PORT,
    distinct for every job running side by side), else any free port."""
    given = os.environ.get("GPTLAB_MASTER_PORT", "")
    return int(given) if given.isdigit() else _free_port()


def _command() -> list[str]:
    """How rank 0 was started: its script or module, or, in a slot worker of a parallel sweep, the
    sweep's own entry point (GPTLAB_ENTRY), so that the ranks run train.py, not the worker."""
    import json

    import __main__

    entry = os.environ.get("GPTLAB_ENTRY")
    if entry:
        return [str(part) for part in json.loads(entry)]

    spec = getattr(__main__, "__spec__", None)
    if spec is None:
        return [sys.executable, os.path.abspath(sys.argv[0])]
    return [sys.executable, "-m", spec.name]


def _watch(children: list[subprocess.Popen], main_pid: int, stop: threading.Event) -> None:
    """If a worker dies, end the whole run instead of leaving rank 0 waiting in a collective."""
    while not stop.is_set():
        for child in children:
            code = child.poll()
            if code not in (None, 0):
                log.error("worker process %d exited with code %d; stopping the run", child.pid, code)
                for other in children:
                    if other.poll() is None:
                        other.kill()
                os.kill(main_pid, signal.SIGKILL)
                return
        time.sleep(0.5)


class LocalWorkers:
    """Ranks 1..n-1 of this node, started as `train.py <this job's overrides>` in this job's directory."""

    def __init__(self, n_local: int, run_dir: str, overrides: list[str]) -> None:
        self.children: list[subprocess.Popen] = []
        self._stop = threading.Event()
        port = str(rendezvous_port())
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port, NODE_RANK="0", LOCAL_RANK="0")
        os.environ["WORLD_SIZE"] = str(n_local)
        for rank in range(1, n_local):
            env = {**os.environ, "LOCAL_RANK": str(rank)}
            cmd = [
                *_command(),
                *overrides,
                f"hydra.run.dir={run_dir}",
                "hydra.output_subdir=null",
                f"hydra.job.name=train_rank_{rank}",
            ]
            self.children.append(subprocess.Popen(cmd, env=env, cwd=os.getcwd()))
        self._watcher = threading.Thread(
            target=_watch, args=(self.children, os.getpid(), self._stop), daemon=True
        )
        self._watcher.start()
        log.info("started %d worker process(es) on port %s", len(self.children), port)

    def join(self) -> None:
        """Wait for the workers to finish; raise if one failed."""
        self._stop.set()
        codes = [child.wait() for child in self.children]
        if any(codes):
            raise RuntimeError(f"worker processes exited with codes {codes}")

    def kill(self) -> None:
        self._stop.set()
        for child in self.children:
            if child.poll() is None:
                child.kill()

    @staticmethod
    def clear_env() -> None:
        """Forget this job's rendezvous so the next job of a sweep starts clean."""
        for key in ("MASTER_ADDR", "MASTER_PORT", "NODE_RANK", "LOCAL_RANK", "WORLD_SIZE"):
            os.environ.pop(key, None)
