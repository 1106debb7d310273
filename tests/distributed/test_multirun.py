"""`train.py -m model.n_layer=2,4 trainer.accelerator=cpu trainer.devices=2`: two jobs, two processes each.

Lightning's own launcher would re-run the sweep in every child (Lightning issue 11300); ours starts
rank 1 with the job's own overrides in the job's own directory. Checked: exactly two jobs, nothing
outside the sweep directory, complete metrics, and one finished wandb offline run per job.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from wandb.proto import wandb_internal_pb2

from .helpers import BLOCK, GLOBAL_BATCH, STEPS, Run, read_metrics, series

pytestmark = [pytest.mark.multiproc, pytest.mark.slow]
LEVELDB_BLOCK = 32768  # the .wandb file is a LevelDB-style log of protobuf records
RECORD_HEADER = 7  # crc32 (4), length (2, little endian), type (1: full, 2: first, 3: middle, 4: last)


def wandb_records(path: Path) -> list[wandb_internal_pb2.Record]:
    """The records of a .wandb file, read without syncing anything."""
    data = path.read_bytes()
    assert data[:4] == b":W&B", f"{path} is not a wandb transaction log"
    pos, pending, records = 7, b"", []
    while pos + RECORD_HEADER <= len(data):
        if LEVELDB_BLOCK - pos % LEVELDB_BLOCK < RECORD_HEADER:
            pos += LEVELDB_BLOCK - pos % LEVELDB_BLOCK  # block trailer padding
            continue
        length, kind = int.from_bytes(data[pos + 4 : pos + 6], "little"), data[pos + 6]
        chunk = data[pos + RECORD_HEADER : pos + RECORD_HEADER + length]
        pos += RECORD_HEADER + length
        pending = chunk if kind in (1, 2) else pending + chunk
        if kind in (1, 4):
            records.append(wandb_internal_pb2.Record.FromString(pending))
    return records


def sweep_dir(r: Run) -> Path:
    return Path(next(a for a in r.cmd if a.startswith("hydra.sweep.dir=")).split("=", 1)[1])


def test_two_jobs_and_nothing_else(sweep_run: Run) -> None:
    sweep_run.check()
    root = sweep_dir(sweep_run)
    assert sorted(p.name for p in root.iterdir()) == ["0", "1", "multirun.yaml", "progress.json"]
    assert list(sweep_run.cwd.iterdir()) == [], "the sweep left files in the working directory"
    # neither job nested a sweep of its own, and no rank wrote elsewhere
    assert not list(root.glob("*/multirun.yaml")) and not list(root.glob("*/[0-9]"))


@pytest.mark.parametrize(("job", "n_layer"), [(0, 2), (1, 4)])
def test_each_job_is_a_complete_two_process_run(sweep_run: Run, job: int, n_layer: int) -> None:
    sweep_run.check()
    job_dir = sweep_dir(sweep_run) / str(job)
    overrides = yaml.safe_load((job_dir / ".hydra" / "overrides.yaml").read_text())
    assert f"model.n_layer={n_layer}" in overrides
    assert (job_dir / "train_rank_1.log").is_file(), "rank 1 did not run in this job's directory"

    metrics = read_metrics(job_dir)
    assert list(series(metrics, "train/loss")) == list(range(STEPS))
    assert f"grad_norm/block_{n_layer - 1:02d}" in metrics[0]
    assert f"grad_norm/block_{n_layer:02d}" not in metrics[0]
    # world size 2: two ranks of 2 windows make the global batch of 4
    assert series(metrics, "tokens_seen")[STEPS - 1] == STEPS * GLOBAL_BATCH * BLOCK


def test_each_job_finished_its_own_wandb_run(sweep_run: Run) -> None:
    sweep_run.check()
    run_ids = []
    for job in ("0", "1"):
        wandb_dir = sweep_dir(sweep_run) / job / "wandb"
        offline = sorted(wandb_dir.glob("offline-run-*"))
        assert len(offline) == 1, offline
        latest = (wandb_dir / "latest-run").resolve()
        assert latest == offline[0].resolve() and latest.is_dir()
        (log,) = latest.glob("run-*.wandb")
        records = wandb_records(log)
        kinds = [r.WhichOneof("record_type") for r in records]
        assert kinds[-1] == "exit", kinds[-5:]
        assert records[-1].exit.exit_code == 0
        assert "history" in kinds
        (run_record,) = [r.run for r in records if r.WhichOneof("record_type") == "run"]
        run_ids.append(run_record.run_id)
        assert log.name == f"run-{run_record.run_id}.wandb"
    assert run_ids[0] != run_ids[1]
