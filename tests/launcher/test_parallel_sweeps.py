"""Sweeps side by side (hydra/launcher=slots) and as a submitit array (array_local), in real processes.

The oracle for the numbers is the serial sweep (Hydra's basic launcher path, one job after another
in one process) of the same quick grid at one thread: the parallel runs must give the same final
loss job for job, the same report tables and one wandb run per job in one group plus one summary
run. The GPU split is checked with a probe app (no torch) that records the environment its job got.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gptlab.analysis.sweep.tables import parse_table
from tests.cli_here import train_py_here
from tests.conftest import QUICK_ENV, REPO, TINY, run_script
from tests.distributed.test_multirun import wandb_records

PROBE = REPO / "tests" / "launcher" / "probe_app" / "app.py"
TABLES = ("#### Arms", "#### Against the baseline", "#### Final val loss by LR, mean [95% CI] over seeds")


def probe(sweep: Path, *args: str) -> tuple[subprocess.CompletedProcess, list[dict]]:
    env = {**os.environ, "PROBE_SWEEP_DIR": str(sweep)}
    proc = subprocess.run(
        [sys.executable, str(PROBE), "-m", *args], capture_output=True, text=True, timeout=120, env=env
    )
    seen = [
        json.loads(p.read_text()) for p in sorted(sweep.glob("*/seen.json"), key=lambda p: int(p.parent.name))
    ]
    return proc, seen


def overlapping(a: dict, b: dict) -> bool:
    return a["start"] < b["end"] and b["start"] < a["end"]


@pytest.mark.parametrize(
    ("devices", "expected"), [(2, {"0,1", "2,3"}), (1, {"0", "1", "2", "3"})], ids=["devices2", "devices1"]
)
def test_each_running_job_gets_its_own_gpus_port_and_threads(
    tmp_path: Path, devices: int, expected: set[str]
) -> None:
    """4 GPUs shared out: trainer.devices=2 → 2 jobs at once on 0,1 and 2,3; devices=1 → 4 at once,
    one GPU each. Jobs that run at the same time never share a GPU or a port."""
    n_jobs = 2 * len(expected)
    proc, seen = probe(
        tmp_path / "s", f"x={','.join(str(i) for i in range(n_jobs))}", f"trainer.devices={devices}",
        "hydra.launcher.gpus=[0,1,2,3]", f"barrier={len(expected)}", "sleep=0.5",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert [s["num"] for s in seen] == list(range(n_jobs))
    assert {s["cvd"] for s in seen} == expected  # every slot used, no job sees all four
    cores = len(os.sched_getaffinity(0))
    assert {s["omp"] for s in seen} == {str(max(1, cores // (len(expected) * devices)))}
    for i, a in enumerate(seen):
        for b in seen[i + 1 :]:
            if overlapping(a, b):
                assert a["cvd"] != b["cvd"] and a["port"] != b["port"], (a, b)
    assert all(s["met"] for s in seen)  # the first len(expected) jobs all ran at once (a barrier)
    peak = max(sum(overlapping(a, b) for b in seen) for a in seen)  # a job overlaps itself
    assert peak <= len(expected)  # never more than the slots


def test_a_sweep_started_once_per_torchrun_rank_runs_its_jobs_one_by_one(tmp_path: Path) -> None:
    """Under torchrun every rank runs the whole sweep (README, Multi-node): no slots, no GPU split."""
    env = {**os.environ, "PROBE_SWEEP_DIR": str(tmp_path / "s"), "TORCHELASTIC_RUN_ID": "t1"}
    proc = subprocess.run(
        [sys.executable, str(PROBE), "-m", "x=0,1,2,3", FOUR, "sleep=0.2"],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    seen = [json.loads(p.read_text()) for p in sorted((tmp_path / "s").glob("*/seen.json"))]
    assert len(seen) == 4 and {s["pid"] for s in seen} == {seen[0]["pid"]}  # one process, in turn
    assert {s["cvd"] for s in seen} == {os.environ.get("CUDA_VISIBLE_DEVICES")}


def test_a_crashing_job_does_not_stop_the_others(tmp_path: Path) -> None:
    proc, seen = probe(
        tmp_path / "s", "x=0,1,2,3,4", "crash_at=1", "hydra.launcher.gpus=[0,1,2,3]", "sleep=0.3"
    )
    assert proc.returncode != 0 and "job x=1 crashed on purpose" in proc.stderr
    assert [s["num"] for s in seen] == [0, 1, 2, 3, 4]  # every job ran, the failure is reported at the end


FOUR = "hydra.launcher.gpus=[0,1,2,3]"
BAD = {
    "zero": (
        ["hydra.launcher.slots=0"],
        "error: hydra.launcher.slots=0 is not accepted; give auto or an integer >= 1",
    ),
    "too_many": (
        ["hydra.launcher.slots=3", FOUR],
        "hydra.launcher.slots=3 with trainer.devices=2 needs 6 GPUs",
    ),
    "devices_over_node": (["trainer.devices=8", FOUR], "trainer.devices=8 is larger than the 4 GPU(s)"),
}


@pytest.mark.parametrize(("args", "message"), list(BAD.values()), ids=list(BAD))
def test_bad_settings_are_refused_before_any_job(tmp_path: Path, args: list[str], message: str) -> None:
    proc, seen = probe(tmp_path / "s", "x=0,1", *args)
    assert proc.returncode == 2 and message in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and seen == []


def test_ablation_sweeper_refuses_bad_slots_before_writing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """The ablation sweeper asks the launcher to check its jobs before it writes anything. train.py
    in this process (the refusal's exit code and line from a process: the probe tests above)."""
    out = tmp_path / "sweep"
    code, stderr = train_py_here(
        monkeypatch, capfd, "-m", "experiment=ablate_tying_quick", f"hydra.sweep.dir={out}",
        "hydra.launcher.slots=0", "logger=csv",
    )  # fmt: skip
    assert code == 2
    assert stderr.strip() == "error: hydra.launcher.slots=0 is not accepted; give auto or an integer >= 1"
    assert not out.exists()


def _losses(sweep: Path) -> dict[str, float]:
    return {
        d.name: json.loads((d / "metrics.json").read_text())["final_val_loss"]
        for d in sweep.iterdir()
        if d.name.isdigit()
    }


def _tables(sweep: Path) -> dict[str, list[dict[str, str]]]:
    text = (sweep / "report.md").read_text()
    return {t: parse_table(text, t) for t in TABLES}


@pytest.mark.slow
def test_two_slots_match_the_serial_sweep_job_for_job(quick_tying_sweep: Path, tmp_path: Path) -> None:
    """The quick grid with 2 slots: the same 8 job dirs and overrides, the same final losses (exactly:
    one thread per job in both), the same report tables; wandb: one run per job, all in one group,
    and the summary run written once, after the last job."""
    out = tmp_path / "sweep"
    cache = quick_tying_sweep.parent.parent / "token-cache"
    proc = run_script(
        "train.py", "-m", "experiment=ablate_tying_quick", f"hydra.sweep.dir={out}",
        f"data.cache_dir={cache}", "hydra.launcher.slots=2", "hydra.launcher.threads=1",
        env=QUICK_ENV, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Launching 8 jobs in 2 slots side by side" in proc.stdout + proc.stderr
    serial = _losses(quick_tying_sweep)
    assert _losses(out) == serial and len(serial) == 8
    for k in serial:
        ours = (out / k / ".hydra" / "overrides.yaml").read_text()
        assert ours == (quick_tying_sweep / k / ".hydra" / "overrides.yaml").read_text()
    assert _tables(out) == _tables(quick_tying_sweep)
    groups = set()
    for k in serial:
        (f,) = (out / k).glob("wandb/offline-run-*/run-*.wandb")
        (run,) = [r.run for r in wandb_records(f) if r.WhichOneof("record_type") == "run"]
        groups.add(run.run_group)
    (summary,) = out.glob("wandb/offline-run-*/run-*.wandb")
    (run,) = [r.run for r in wandb_records(summary) if r.WhichOneof("record_type") == "run"]
    assert len(groups) == 1 and run.run_group in groups and run.job_type == "report"
    last_job_end = max((out / k / "metrics.json").stat().st_mtime for k in serial)
    assert summary.stat().st_mtime >= last_job_end


@pytest.mark.slow
def test_submitit_array_matches_the_serial_sweep(quick_tying_sweep: Path, tmp_path: Path) -> None:
    """hydra/launcher=array_local (submitit's local executor, real subprocesses, all at once): the
    grid's seed-1, LR-1e-3 corner (both arms) as one array of 2, the same final losses job for job as
    the serial sweep's jobs 0 and 2 (seed 1, LR 1e-3, untied and tied: seed is the outermost
    dimension and LR the innermost, so the numbers agree)."""
    out = tmp_path / "sweep"
    cache = quick_tying_sweep.parent.parent / "token-cache"
    proc = run_script(
        "train.py", "-m", "experiment=ablate_tying_quick", "hydra.sweeper.seeds=1",
        "hydra.sweeper.lr.points=1", "hydra.sweeper.lr.max=1.0e-3", f"hydra.sweep.dir={out}",
        f"data.cache_dir={cache}", "hydra/launcher=array_local", "logger=csv", env=QUICK_ENV, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "submitted 2 jobs as one array" in proc.stdout + proc.stderr
    serial = _losses(quick_tying_sweep)
    assert _losses(out) == {"0": serial["0"], "1": serial["2"]}


def _port_lines(run_dir: Path) -> list[str]:
    # the job's own log (train.log); output.log is the same lines as the job's terminal saw them
    text = "".join(p.read_text() for p in run_dir.glob("*.log") if p.name != "output.log")
    return [
        line.rsplit("on port ", 1)[1].strip()
        for line in text.splitlines()
        if "worker process(es) on port" in line
    ]


@pytest.mark.slow
@pytest.mark.multiproc
def test_two_ddp_jobs_side_by_side_do_not_collide(tmp_path: Path) -> None:
    """The README's plain multirun with 2 slots: two 2-process gloo jobs at once, each on its own
    rendezvous port, both finish."""
    out = tmp_path / "sweep"
    proc = run_script(
        "train.py", "-m", "model/ffn=gelu,swiglu", "trainer.accelerator=cpu", "trainer.devices=2",
        "hydra.launcher.slots=2", "trainer.max_steps=6", "trainer.val_check_interval=3", *TINY,
        "sample.max_new_tokens=0", "callbacks.telemetry.figures=false", f"hydra.sweep.dir={out}", timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    ports = [_port_lines(out / k) for k in ("0", "1")]
    assert all(len(p) == 1 for p in ports) and ports[0] != ports[1], ports
    slot_ports = re.findall(
        r"port (\d+)", (proc.stdout + proc.stderr).split("slots side by side", 1)[1].split("\n")[0]
    )
    assert sorted(p for (p,) in ports) == sorted(slot_ports)  # each job on the port its slot reserved
    for k in ("0", "1"):
        assert json.loads((out / k / "metrics.json").read_text())["status"] == "finished"
    spans = [json.loads((out / k / "metrics.json").read_text()) for k in ("0", "1")]
    assert all(s["steps"] == 6 for s in spans)
