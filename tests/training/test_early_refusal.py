"""train.py refuses a bad config before Lightning is imported (training/run_record.py), with the
same record as a refusal after start-up: exit 2 and one stderr line for a single run, metrics.json
`failed` with the error and the overrides; in a sweep, each refused job fails alone.

The oracle for "before Lightning": Python's own import log (`-X importtime`) of the process. The same
run checks train.py's start-up imports are frozen (gptlab.heap): CPython's gc.callbacks note
the objects each full collection walks; before, three walked 56,000 to 170,000 of torch's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
NOT_GQA = (
    "error: model.n_kv_head=3 is not accepted with model.n_head=4; give null (= n_head, multi-head), "
    "1 (multi-query) or a divisor of n_head (grouped-query)"
)


# train.py as `python -c RECORD train.py ...`: the same run, the size of each full collection noted
RECORD = """
import atexit, gc, json, os, runpy, sys
walked = []
def note(phase, info):
    if phase == "start" and info["generation"] == 2:
        walked.append(len(gc.get_objects(generation=2)))
gc.callbacks.append(note)
atexit.register(lambda: open(os.environ["GC_RECORD"], "w").write(json.dumps(walked)))
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def train(*args: str, record: Path) -> subprocess.CompletedProcess:
    env = {
        "WANDB_MODE": "disabled",
        "PATH": "/usr/bin:/bin",
        "HOME": str(Path.home()),
        "GC_RECORD": str(record),
    }
    env |= {
        k: v for k, v in os.environ.items() if k == "PYTHONPATH"
    }  # a mutated copy's source (make mutants)
    cmd = [sys.executable, "-X", "importtime", "-c", RECORD, str(REPO / "train.py"), *args]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300, env=env)


def imported(stderr: str) -> set[str]:
    """The top-level packages the process imported, from its -X importtime lines."""
    names = [
        line.rsplit("|", 1)[1].strip() for line in stderr.splitlines() if line.startswith("import time:")
    ]
    return {n.split(".")[0] for n in names}


def said(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if not line.startswith("import time:")]


def test_a_refused_run_exits_2_with_its_record_and_no_lightning(tmp_path: Path) -> None:
    run = tmp_path / "run"
    proc = train("model.n_kv_head=3", f"hydra.run.dir={run}", record=tmp_path / "gc.json")
    assert proc.returncode == 2 and said(proc.stderr) == [NOT_GQA], proc.stderr[-3000:]
    packages = imported(proc.stderr)
    assert "torch" in packages and "hydra" in packages  # the log is read right
    assert not packages & {"lightning", "torchmetrics", "wandb"}, sorted(packages)
    record = json.loads((run / "metrics.json").read_text())
    assert record == {"status": "failed", "error": NOT_GQA, "overrides": ["model.n_kv_head=3"]}
    # torch's and Hydra's objects frozen after their import: no full collection walks them
    walked = json.loads((tmp_path / "gc.json").read_text())
    assert max(walked, default=0) < 50_000, walked


def test_a_sweep_of_refused_jobs_records_each_and_exits_2(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    proc = train("-m", "model.n_kv_head=3,5", f"hydra.sweep.dir={sweep}", record=tmp_path / "gc.json")
    assert proc.returncode == 2, said(proc.stderr)[-20:]
    assert "2 job(s) of the sweep failed" in proc.stderr
    for job, n in enumerate((3, 5)):
        record = json.loads((sweep / str(job) / "metrics.json").read_text())
        assert record["status"] == "failed" and f"model.n_kv_head={n} is not accepted" in record["error"]
        assert record["overrides"] == [f"model.n_kv_head={n}"]
