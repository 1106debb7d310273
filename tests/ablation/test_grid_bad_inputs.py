"""Bad ablation grids: one line naming the field, exit 2, nothing started (no sweep dir written);
a sweep dir holding another grid: one line saying which job differs, nothing overwritten."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from gptlab.ablation.grid import GridError, build_grid, lr_values, seed_values
from tests.cli_here import train_py_here
from tests.conftest import QUICK_ENV, run_script

QUICK = ["-m", "experiment=ablate_ffn_quick", "hydra.sweeper.report=false"]


# The rows of docs/bad-inputs.md's ablation-grid table. One row of each kind of refusal runs as a
# subprocess (a GridError from the grid's fields; a job the schema refuses, found by composing one
# job per arm); the other rows take the same path through train.py in this process.
BAD_GRIDS = [
    pytest.param("hydra.sweeper.lr.min=0", "hydra.sweeper.lr.min=0.0", "subprocess", marks=pytest.mark.slow),
    ("hydra.sweeper.lr.max=-0.01", "hydra.sweeper.lr.max=-0.01", "in_process"),
    ("optim.lr=0.001,-0.003", "optim.lr=-0.003", "in_process"),
    ("hydra.sweeper.seeds=0", "hydra.sweeper.seeds=0", "in_process"),
    (
        "hydra.sweeper.arms=[gelu,gelux]",
        "hydra.sweeper.arms: 'gelux' is not an option of the config group model/ffn",
        "in_process",
    ),
    ("model/ffn=gelu,gelux", "model/ffn: 'gelux' is not an option", "in_process"),
    ("hydra.sweeper.baseline=relu", "hydra.sweeper.baseline='relu' is not one of the arms", "in_process"),
    pytest.param(
        "hydra.sweeper.arm=model.norm_placement hydra.sweeper.arms=[pre,middle] hydra.sweeper.baseline=pre",
        "model.norm_placement='middle' is not accepted",
        "subprocess",
        marks=pytest.mark.slow,
    ),
]


@pytest.mark.parametrize(("override", "field", "how"), BAD_GRIDS)
def test_bad_grid_is_one_line_exit_2_nothing_started(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    override: str,
    field: str,
    how: str,
) -> None:
    sweep = tmp_path / "sweep"
    args = [*QUICK, *override.split(), f"hydra.sweep.dir={sweep}"]
    if how == "subprocess":
        proc = run_script("train.py", *args, timeout=300)
        code, stderr = proc.returncode, proc.stderr
    else:
        code, stderr = train_py_here(monkeypatch, capfd, *args)
    assert code == 2, stderr[-2000:]
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and field in lines[0], stderr
    assert not sweep.exists()


@pytest.mark.slow
def test_sweep_dir_of_another_grid_is_refused_untouched(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    (sweep / "0" / ".hydra").mkdir(parents=True)
    (sweep / "0" / ".hydra" / "overrides.yaml").write_text("- seed=1\n- model/ffn=relu\n- optim.lr=0.5\n")
    (sweep / "0" / "metrics.json").write_text(json.dumps({"status": "finished"}))
    before = {p: p.stat().st_mtime_ns for p in sweep.rglob("*")}
    proc = run_script("train.py", *QUICK, f"hydra.sweep.dir={sweep}", timeout=300)
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "holds job 0 of a different grid" in lines[0], proc.stderr
    assert {p: p.stat().st_mtime_ns for p in sweep.rglob("*")} == before
    assert not (sweep / "multirun.yaml").exists()


def test_grid_fields_in_process() -> None:
    """The same checks without a process: each names its field."""
    for call, field in (
        (lambda: lr_values(1e-3, 1e-2, 0), "hydra.sweeper.lr.points"),
        (lambda: lr_values(1e-2, 1e-3, 5), "hydra.sweeper.lr.min"),
        (lambda: lr_values(float("nan"), 1e-3, 5), "hydra.sweeper.lr.min"),
        (lambda: seed_values(-1), "hydra.sweeper.seeds"),
        (lambda: seed_values(True), "hydra.sweeper.seeds"),
    ):
        with pytest.raises(GridError, match=field.replace(".", r"\.")):
            call()
    with pytest.raises(GridError, match="hydra.sweeper.baseline='relu'"):
        build_grid("model/ffn", ["gelu", "swiglu"], "relu", ["0.001"], ["1"], {}, [])
    with pytest.raises(GridError, match="hydra.sweeper.arm is not set"):
        build_grid("", ["gelu"], None, ["0.001"], ["1"], {}, [])


def test_grid_order_and_log_spacing() -> None:
    lrs = lr_values(1e-3, 1e-1, 5)
    assert lrs == ["0.001", "0.00316", "0.01", "0.0316", "0.1"]
    grid = build_grid(
        "model/ffn", ["gelu", "swiglu"], None, lrs[:2], ["1", "2"], {}, [("trainer.max_steps", ["5"], False)]
    )
    jobs = grid.jobs()
    assert len(jobs) == 8 and grid.baseline == "gelu"
    # seed outermost, LR innermost; fixed overrides on every job
    assert jobs[0] == ["seed=1", "model/ffn=gelu", "optim.lr=0.001", "trainer.max_steps=5"]
    assert jobs[1][2] == "optim.lr=0.00316" and jobs[4][0] == "seed=2"
    # more seeds append jobs: the old ones keep their numbers
    more = build_grid(
        "model/ffn",
        ["gelu", "swiglu"],
        None,
        lrs[:2],
        ["1", "2", "3"],
        {},
        [("trainer.max_steps", ["5"], False)],
    )
    assert more.jobs()[:8] == jobs


@pytest.mark.slow
def test_sweep_dir_composed_from_another_config_is_refused_untouched(
    quick_tying_sweep: Path, tmp_path: Path
) -> None:
    """Same overrides, different experiment: a preset edited between the first run and the re-run
    (here: the record says the jobs composed to n_embd=999) must not mix old and new jobs. The first
    run is the session's quick tying sweep (a copy of it), re-run with its own command."""
    sweep = tmp_path / "sweep"
    shutil.copytree(quick_tying_sweep, sweep)
    record = json.loads((sweep / "ablation.json").read_text())
    assert list(record["configs"]) and all(c["model"]["n_embd"] == 32 for c in record["configs"].values())
    for c in record["configs"].values():
        c["model"]["n_embd"] = 999
    (sweep / "ablation.json").write_text(json.dumps(record))
    before = {p: p.stat().st_mtime_ns for p in sweep.rglob("*")}
    cache = quick_tying_sweep.parent.parent / "token-cache"
    proc = run_script(
        "train.py", "-m", "experiment=ablate_tying_quick", f"hydra.sweep.dir={sweep}",
        f"data.cache_dir={cache}", env=QUICK_ENV, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "composed from another config" in lines[0], proc.stderr
    assert "model.n_embd was 999 and is now 32" in lines[0]
    assert {p: p.stat().st_mtime_ns for p in sweep.rglob("*")} == before


def test_first_difference_names_the_dotted_key() -> None:
    from gptlab.ablation.sweep_dir import first_difference

    old = {"model": {"n_layer": 8, "n_embd": 64}, "optim": {"warmup_steps": 40}}
    assert (
        first_difference(old, {"model": {"n_layer": 8, "n_embd": 64}, "optim": {"warmup_steps": 40}}) is None
    )
    assert first_difference(old, {"model": {"n_layer": 8, "n_embd": 32}, "optim": {"warmup_steps": 40}}) == (
        "model.n_embd", 64, 32,
    )  # fmt: skip
    assert first_difference(old, {**old, "data": {"batch_size": 16}}) == (
        "data",
        "<absent>",
        {"batch_size": 16},
    )
