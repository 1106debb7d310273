"""`python train.py` end to end on the embedded corpus: learns, checkpoints, resumes, DDP, multirun.

The resume trains in this process (tests/distributed/ranks.py) and generate.py's main runs in it: they
are about the step count and the default prompt, not the command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from gptlab.data.config import DataConfig
from gptlab.data.packing import val_mask
from gptlab.data.resolve import resolve_source
from gptlab.data.sources import load_documents
from tests.conftest import TINY, column, read_csv_metrics, run_script


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One two-job multirun (`model.n_layer=2,1`), shared by the tests below: job 0 is the short
    single run they read (TINY's n_layer=2), job 1 the multirun's second job (one process start
    for both, where a single run and a separate 3-step sweep each paid one)."""
    base = tmp_path_factory.mktemp("train")
    proc = run_script(
        "train.py",
        "-m",
        *TINY,
        "model.n_layer=2,1",
        "trainer.max_steps=30",
        "trainer.val_check_interval=10",
        "optim.lr=3e-3",
        "optim.warmup_steps=5",
        f"hydra.sweep.dir={base / 'sweep'}",
        f"data.cache_dir={base / 'cache'}",
        cwd=base,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return base / "sweep"


@pytest.fixture(scope="module")
def trained(sweep: Path) -> Path:
    """The sweep's job 0: a short run of TINY's model, 30 steps."""
    return sweep / "0"


@pytest.mark.slow
def test_short_run_lowers_validation_loss(trained: Path) -> None:
    val = column(read_csv_metrics(trained), "val/loss")
    assert [s for s, _ in val] == [9, 19, 29]
    assert val[-1][1] < val[0][1] - 0.1, val


@pytest.mark.slow
def test_run_dir_has_checkpoints_summary_sample_and_config(trained: Path) -> None:
    assert (trained / "checkpoints" / "last.ckpt").is_file()
    assert (trained / "checkpoints" / "best.ckpt").is_file()
    assert (trained / ".hydra" / "config.yaml").is_file()
    summary = json.loads((trained / "metrics.json").read_text())
    assert summary["status"] == "finished" and summary["steps"] == 30
    # the prompt is the start of the first val document (byte tokens: its first 16 bytes)
    docs = load_documents(resolve_source(DataConfig(max_bytes=400000)))
    first_val = docs["text"][int(val_mask(len(docs), 0.05, docs["group"]).argmax())]
    assert summary["sample"].startswith(first_val[:16]) and len(summary["sample"]) > 16
    ckpt = torch.load(trained / "checkpoints" / "last.ckpt", weights_only=True)
    assert ckpt["global_step"] == 30
    assert ckpt["hyper_parameters"]["model"]["n_layer"] == 2


@pytest.mark.slow
def test_generate_without_prompt_starts_a_validation_document(
    trained: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """generate.py with no prompt continues the run's first val document (byte tokens: its bytes);
    its main in this process, from the run's directory (generate.py's command line runs in
    tests/distributed/test_fsdp_checkpoint.py and tests/training/test_bad_inputs.py)."""
    from tests.interop.helpers import load_cli

    monkeypatch.chdir(trained)
    capsys.readouterr()
    assert (
        load_cli("generate.py").main(
            [f"ckpt_path={trained / 'checkpoints' / 'last.ckpt'}", "max_new_tokens=8"]
        )
        == 0
    )
    out = capsys.readouterr().out
    docs = load_documents(resolve_source(DataConfig(max_bytes=400000)))
    first_val = docs["text"][int(val_mask(len(docs), 0.05, docs["group"]).argmax())]
    assert out.startswith(first_val[:16]) and len(out) > 16, out[:80]


@pytest.mark.slow
def test_resume_continues_the_step_count(trained: Path, tmp_path: Path) -> None:
    """ckpt_path=<last.ckpt>, trained in this process on the config train.py composes (its command
    line is the other tests' here)."""
    from tests.distributed.ranks import train_once

    resumed = tmp_path / "resumed"
    summary = train_once(
        resumed,
        [
            *TINY,
            "trainer.max_steps=36",
            "trainer.val_check_interval=10",
            "optim.lr=3e-3",
            "optim.warmup_steps=5",
            f"ckpt_path={trained / 'checkpoints' / 'last.ckpt'}",
            f"data.cache_dir={trained.parent.parent / 'cache'}",
        ],
    )
    steps = [s for s, _ in column(read_csv_metrics(resumed), "train/loss")]
    assert steps and min(steps) >= 30 and max(steps) == 35
    assert summary["steps"] == 36
    assert json.loads((resumed / "metrics.json").read_text())["steps"] == 36
    # 36 is not a validation step: last.ckpt is still written at the end of training
    assert torch.load(resumed / "checkpoints" / "last.ckpt", weights_only=True)["global_step"] == 36


@pytest.mark.slow
@pytest.mark.multiproc
def test_two_process_ddp_on_cpu(tmp_path: Path) -> None:
    run_dir = tmp_path / "ddp"
    proc = run_script(
        "train.py",
        *TINY,
        "trainer.accelerator=cpu",
        "trainer.devices=2",
        "trainer.max_steps=6",
        "trainer.val_check_interval=3",
        f"hydra.run.dir={run_dir}",
        f"data.cache_dir={tmp_path / 'cache'}",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Starting with 2 processes" in proc.stdout + proc.stderr
    assert json.loads((run_dir / "metrics.json").read_text())["steps"] == 6
    assert (run_dir / "train_rank_1.log").exists()  # rank 1 ran in this run's directory
    assert not (tmp_path / "outputs").exists()


@pytest.mark.slow
def test_two_job_multirun(sweep: Path) -> None:
    jobs = sorted(p.name for p in sweep.iterdir() if p.is_dir())
    assert jobs == ["0", "1"]
    for job, n_layer in (("0", 2), ("1", 1)):
        summary = json.loads((sweep / job / "metrics.json").read_text())
        assert summary["status"] == "finished" and summary["steps"] == 30
        assert f"model.n_layer={n_layer}" in summary["run_name"]
    assert not (sweep.parent / "outputs").exists()
