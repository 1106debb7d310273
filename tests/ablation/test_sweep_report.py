"""End to end: a tiny 2×2 sweep through an experiment preset, then scripts/report.py on it."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from gptlab.analysis.report import parse_table, read_csv_log
from tests.conftest import run_script

# experiment=ablate_tying sweeps model/tying × seed; the command line narrows it to 2 × 2, tiny.
SWEEP = [
    "-m",
    "experiment=ablate_tying",
    "seed=1,2",
    "model.n_layer=1",
    "model.n_embd=32",
    "model.n_head=2",
    "model.block_size=32",
    "data.batch_size=4",
    "data.max_bytes=300000",
    "trainer.max_steps=4",
    "trainer.val_check_interval=2",
    "data.val_windows=4",  # 1 batch of 4
    "trainer.log_every_n_steps=1",
    "logger=csv",
]
ENV = {"OMP_NUM_THREADS": "1"}


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Run the sweep once for every test of this module."""
    root = tmp_path_factory.mktemp("sweep")
    out = root / "sweep"
    cache = tmp_path_factory.getbasetemp() / "token-cache"
    proc = run_script(
        "train.py", *SWEEP, f"hydra.sweep.dir={out}", f"data.cache_dir={cache}", env=ENV, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


def _job_dirs(sweep: Path) -> list[Path]:
    return sorted((d for d in sweep.iterdir() if d.is_dir() and d.name.isdigit()), key=lambda d: int(d.name))


def _cell(value: float | None, digits: int = 4) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


@pytest.mark.slow
def test_sweep_jobs_share_group_and_tags(sweep: Path) -> None:
    jobs = _job_dirs(sweep)
    assert len(jobs) == 4
    metrics = [json.loads((j / "metrics.json").read_text()) for j in jobs]
    groups = {m["group"] for m in metrics}
    assert len(groups) == 1, groups  # one ${now} for the whole sweep, though jobs start seconds apart
    assert next(iter(groups)).startswith("ablate_tying-")
    for m in metrics:
        assert m["tags"] == ["ablate_tying", "model/tying", "seed"]
        assert isinstance(m["num_params"], int) and m["num_params"] > 0
        assert any(o.startswith("model/tying=") for o in m["overrides"])
        assert "experiment=" not in m["run_name"] and "model/tying=" in m["run_name"]
    combos = {(m["overrides"][0], [o for o in m["overrides"] if o.startswith("seed=")][0]) for m in metrics}
    assert len(combos) == 4


@pytest.mark.slow
def test_report_rows_match_each_jobs_metrics(sweep: Path, tmp_path: Path) -> None:
    out = tmp_path / "report"
    proc = run_script("scripts/report.py", str(sweep), f"out={out}", env=ENV)
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = (out / "report.md").read_text()
    rows = parse_table(text)
    jobs = _job_dirs(sweep)
    assert [r["job"] for r in rows] == [j.name for j in jobs]
    for row, job in zip(rows, jobs, strict=True):
        m = json.loads((job / "metrics.json").read_text())
        tying = next(o for o in m["overrides"] if o.startswith("model/tying="))
        seed = next(o for o in m["overrides"] if o.startswith("seed="))
        assert row["overrides"] == f"`{tying}, {seed}`"
        assert row["params"] == f"{m['num_params']:,}"
        assert row["best val loss"] == _cell(m["best_val_loss"])
        assert row["final train loss"] == _cell(m["final_train_loss"])
        assert row["tokens/s"] == f"{m['tokens_per_sec']:.0f}"
        assert row["diverged"] == ("yes" if m["diverged"] else "no")
        assert row["status"] == ("diverged" if m["diverged"] else "finished")
    # untied has V·d more parameters than tied
    params = {r["overrides"]: int(r["params"].replace(",", "")) for r in rows}
    assert params["`model/tying=untied, seed=1`"] - params["`model/tying=tied, seed=1`"] == 256 * 32
    for name in ("loss_curves.png", "grad_norm_heatmaps.png", "grad_norm_depth_profile.png"):
        assert (out / "figures" / name).stat().st_size > 1000
        assert f"figures/{name}" in text
    assert "## Over seeds" in text


@pytest.mark.slow
def test_report_marks_missing_and_truncated_jobs(sweep: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    shutil.copytree(sweep, broken)
    (broken / "1" / "metrics.json").unlink()  # a job that was killed before it finished
    csv_path = broken / "2" / "csv" / "metrics.csv"
    text = csv_path.read_text()
    csv_path.write_text(text[: len(text) - 7])  # cut mid-line, as a crash mid-write would
    (broken / "3" / "metrics.json").write_text('{"status": "failed", "error": "error: boom"}\n')
    proc = run_script("scripts/report.py", str(broken), "figures=false", env=ENV)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = (broken / "report.md").read_text()
    rows = {r["job"]: r for r in parse_table(report)}
    assert set(rows) == {"0", "1", "2", "3"}
    assert rows["1"]["status"].startswith("missing: no metrics.json")
    assert rows["1"]["best val loss"] == "—" and rows["1"]["params"] == "—"
    assert rows["1"]["steps"].endswith("(csv)")  # how far its CSV log got
    assert "model/tying=" in rows["1"]["overrides"]  # still known from .hydra/overrides.yaml
    assert "truncated" in rows["2"]["status"]
    assert rows["3"]["status"] == "failed: error: boom"
    assert rows["0"]["status"] in ("finished", "diverged")
    assert "## Missing or incomplete" in report


def test_expected_jobs_not_started_are_listed(tmp_path: Path) -> None:
    """A sweep dir with only multirun.yaml (nothing ran yet) lists every planned job as not started."""
    from gptlab.analysis.report import read_sweep

    (tmp_path / "multirun.yaml").write_text(
        "hydra:\n"
        "  sweeper:\n"
        "    _target_: hydra._internal.core_plugins.basic_sweeper.BasicSweeper\n"
        "    params:\n"
        "      model/placement: pre,post\n"
        "      model.n_layer: 2,4,6\n"
        "  overrides:\n"
        "    task:\n"
        "    - experiment=ablate_placement\n"
        "    - model.n_layer=2,4\n"
    )
    jobs = read_sweep(tmp_path)
    assert len(jobs) == 4  # the command line's n_layer=2,4 replaces the preset's 2,4,6
    assert all(j.status == "not started" for j in jobs)
    assert {tuple(sorted(j.overrides)) for j in jobs} == {
        tuple(sorted(["model/placement=" + p, "model.n_layer=" + n, "experiment=ablate_placement"]))
        for p in ("pre", "post")
        for n in ("2", "4")
    }


def test_csv_reader_drops_a_cut_line(tmp_path: Path) -> None:
    path = tmp_path / "metrics.csv"
    path.write_text("step,train/loss,val/loss\n0,5.5,\n1,5.25,5.4\n2,5.12")
    series, problems = read_csv_log(path)
    assert series["train/loss"] == [(0, 5.5), (1, 5.25)]  # "5.12" might be "5.1234…" cut short
    assert series["val/loss"] == [(1, 5.4)]
    assert any("truncated" in p for p in problems)
    assert math.isfinite(series["train/loss"][-1][1])
