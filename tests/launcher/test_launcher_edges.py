"""Launcher edges the sweep tests do not reach (issue 37, §6), each against what the outside world
defines: CUDA's CUDA_VISIBLE_DEVICES (an invalid index such as -1 hides every GPU), SLURM's
SLURM_NTASKS (the tasks srun starts), POSIX's return codes (subprocess: −N for a process ended by
signal N; a shell reports 128 + N for a command that signal N ended, and sacct prints that status)."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from gptlab.launcher.pool import _read_outcome
from hydra_plugins.gptlab_launchers import submitit_array
from hydra_plugins.gptlab_launchers.slots_launcher import ranks_launched_outside, visible_gpus


@pytest.mark.parametrize(("given", "ids"), [("-1", []), ("", []), ("2,3", ["2", "3"]), (" 1 ", ["1"])])
def test_cuda_visible_devices_minus_one_hides_every_gpu(
    monkeypatch: pytest.MonkeyPatch, given: str, ids: list[str]
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", given)
    assert visible_gpus("auto") == ids


@pytest.mark.parametrize(("ntasks", "outside"), [("1", False), ("2", True), ("8", True)])
def test_only_an_srun_of_several_tasks_runs_the_sweep_once_per_rank(
    monkeypatch: pytest.MonkeyPatch, ntasks: str, outside: bool
) -> None:
    """`salloc -n 1` / `sbatch` with one task sets SLURM_NTASKS=1: the sweep is this one process,
    and its slots may run jobs side by side; only several tasks make this process one rank of many."""
    for key in ("LOCAL_RANK", "TORCHELASTIC_RUN_ID"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("SLURM_NTASKS", ntasks)
    assert ranks_launched_outside() is outside


def test_a_worker_ended_by_sigterm_itself_reads_as_preempted(tmp_path: Path) -> None:
    """A real process ended by SIGTERM (no handler: Python's default dies of it) has return code
    −15; its job wrote no outcome. That is a preemption, as exit code 143 (Lightning's) is."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    proc.send_signal(signal.SIGTERM)
    code = proc.wait(timeout=30)
    assert code == -signal.SIGTERM
    out = _read_outcome(3, tmp_path / "3.job", code)
    assert out.status == "failed" and out.exit_code == code
    assert str(out.error) == f"job 3 ended without a result (exit code {code}): preempted (SIGTERM)"
    other = _read_outcome(4, tmp_path / "4.job", -signal.SIGSEGV)
    assert str(other.error).endswith(": its worker died")


class SlurmJob:  # the name killing_signal recognises: submitit's SLURM job class
    def __init__(self, job_id: str) -> None:
        self.job_id = job_id


@pytest.mark.parametrize(
    ("exit_code", "signum"),
    [("0:9", signal.SIGKILL), ("137:0", 137 - 128), ("143:0", 143 - 128), ("1:0", None), ("128:0", None)],
)
def test_sacct_exit_codes_name_the_signal_that_ended_a_task(
    monkeypatch: pytest.MonkeyPatch, exit_code: str, signum: int | None
) -> None:
    """sacct's ExitCode is <status>:<signal>; a batch script whose command was killed exits with the
    shell's 128 + N status and signal 0 (what SLURM shows for a srun step killed by the OOM killer
    under a bash wrapper). Either way the task's reason names signal N."""
    table = f"4200_1|FAILED|{exit_code}\n4200_1.batch|FAILED|{exit_code}\n4200_10|COMPLETED|0:0\n"

    def sacct(cmd: list[str], **_: object) -> SimpleNamespace:
        assert cmd[:3] == ["sacct", "-j", "4200_1"]
        return SimpleNamespace(stdout=table)

    monkeypatch.setattr(submitit_array.subprocess, "run", sacct)
    got = submitit_array.killing_signal(SlurmJob("4200_1"))
    if signum is None:
        assert got is None
        return
    assert got == (signum, f"sacct: FAILED {exit_code}")
    reason = submitit_array.failure_reason(SlurmJob("4200_1"), RuntimeError("no result"))
    name = signal.Signals(signum).name
    assert reason.startswith(f"killed by signal {signum} ({name}; sacct: FAILED {exit_code})"), reason
