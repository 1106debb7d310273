"""Sweeps over token budgets (hydra.sweeper.budgets): the expansion into trunks and branches against
the rule written out here, its bad inputs, and `python train.py -m experiment=budget_ffn_quick` end to
end (trunks then branches through the slots launcher, the report's loss against tokens, the compute
saved recomputed from the job directories' own configs and from the steps each job ran, a re-run that
skips every job)."""

from __future__ import annotations

import math
import re
import shutil
from pathlib import Path

import pytest
import yaml

from gptlab.ablation.budgets import BudgetError, budget_plan, budget_steps, compute_saved
from gptlab.ablation.grid import build_grid
from tests.cli_here import train_py_here, train_py_run_here
from tests.conftest import QUICK_ENV, run_script


def plain_grid(sweep_dir: str, plan: list[tuple[int, int, int]]):
    from dataclasses import replace

    grid = build_grid("model/ffn", ["gelu", "swiglu"], None, ["0.001", "0.01"], ["1", "2"], {},
                      [("data.batch_size", ["4"], False)])  # fmt: skip
    return replace(grid, budgets=[list(p) for p in plan], sweep_dir=sweep_dir)


def test_budgets_expand_into_trunks_then_branches() -> None:
    budgets, fraction = [10, 20, 40], 0.2
    plan = budget_plan(budget_steps(budgets, 128), fraction, warmup=2)
    # the rule: decay d = round(0.2 × B) (at least 1), branch point B − d
    assert plan == [(10, 8, 2), (20, 16, 4), (40, 32, 8)]
    grid = plain_grid("/s", plan)
    jobs = grid.jobs()
    plain = grid.plain_jobs()
    assert len(plain) == 8 and len(jobs) == 8 + 8 * 3
    for k, job in enumerate(jobs[:8]):  # trunk k: the plain job k, held LR, a checkpoint at each point
        assert set(plain[k]) <= set(job)
        assert {"optim.schedule=wsd", "optim.decay_steps=0", "optim.branch_points=[8,16,32]",
                "trainer.max_steps=32"} <= set(job)  # fmt: skip
    for i, job in enumerate(jobs[8:]):
        k, (b, at, d) = divmod(i, 3)[0], plan[i % 3]
        own = set(plain[k])  # the trunk's model, data, optim and seed overrides, repeated
        assert own <= set(job)
        assert {f"branch_from=/s/{k}", f"branch.at={at}", f"optim.decay_steps={d}",
                f"trainer.max_steps={b}", "optim.schedule=wsd"} <= set(job)  # fmt: skip
        assert at + d == b
    # compute: separate runs would train every budget whole; the sweep trains the trunks and decays
    assert compute_saved(jobs) == (8 * (10 + 20 + 40), 8 * 32 + 8 * (2 + 4 + 8))


def test_budgets_in_tokens_round_up_to_steps() -> None:
    assert budget_steps(["1K", "2.5K", 64], 128) == [math.ceil(1000 / 128), math.ceil(2500 / 128), 64]


@pytest.mark.parametrize(
    ("budgets", "fraction", "words"),
    [
        ([20, 10], 0.2, "must increase"),
        ([10, 10], 0.2, "twice"),
        (["ten"], 0.2, "hydra.sweeper.budgets has 'ten'"),
        ([10], 1.0, "hydra.sweeper.decay_fraction=1.0"),
        ([3], 0.5, "inside the warmup"),
    ],
)
def test_bad_budgets_are_refused_by_name(budgets: list, fraction: float, words: str) -> None:
    with pytest.raises(BudgetError, match=re.escape(words)):
        budget_plan(budget_steps(budgets, 128), fraction, warmup=2)


def test_budgets_refuse_a_derived_key_on_the_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """train.py in this process (the sweeper's refusals as a real process, exit code and line:
    tests/ablation/test_grid_bad_inputs.py)."""
    code, stderr = train_py_here(
        monkeypatch, capfd, "-m", "experiment=budget_ffn_quick", f"hydra.sweep.dir={tmp_path / 's'}",
        "optim.decay_steps=3",
    )  # fmt: skip
    assert code == 2, stderr[-2000:]
    lines = [x for x in stderr.splitlines() if x.startswith("error:")]
    assert lines == [lines[0]] and "optim.decay_steps is not accepted in a sweep over" in lines[0]
    assert not (tmp_path / "s").exists()


# the fixture's sweep and its re-run log to wandb offline (not CSV only): the view test reads each
# job's logged wandb config and the sweep's view, and a re-run must be the same grid to resume it;
# no downstream task (nothing here reads one), in every run of the preset below alike
NO_TASKS = "callbacks.tasks.names=[]"


@pytest.fixture(scope="module")
def budget_sweep(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The preset's sweep, one slot (trunks then branches in the sweep's process), run in this one
    (tests/cli_here.py; the slots launcher's side-by-side runs are real subprocesses in
    tests/launcher and tests/ablation/test_ladder_sweep.py)."""
    out = tmp_path_factory.mktemp("budgets") / "sweep"
    cache = out.parent / "token-cache"
    proc = train_py_run_here(
        "-m", "experiment=budget_ffn_quick", f"hydra.sweep.dir={out}", f"data.cache_dir={cache}", NO_TASKS,
        env=QUICK_ENV,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out, proc.stdout + proc.stderr


def job_config(job_dir: Path) -> dict:
    return yaml.safe_load((job_dir / ".hydra" / "config.yaml").read_text())


@pytest.mark.slow
def test_budget_sweep_runs_trunks_then_branches_and_reports_loss_against_tokens(budget_sweep) -> None:
    sweep, log = budget_sweep
    dirs = sorted((d for d in sweep.iterdir() if d.name.isdigit()), key=lambda d: int(d.name))
    assert len(dirs) == 12  # 2 arms × 1 LR × 2 seeds: 4 trunks, 2 branches each
    trunks = [d for d in dirs if not job_config(d).get("branch_from")]
    branches = [d for d in dirs if job_config(d).get("branch_from")]
    assert [d.name for d in trunks] == ["0", "1", "2", "3"]
    # the trunks ran as one launcher call before any branch started
    started = [int(m) for m in re.findall(r"\[sweep\] job (\d+) started", log)]
    assert started[:4] == [0, 1, 2, 3] and sorted(started[4:]) == list(range(4, 12))
    for d in branches:
        cfg = job_config(d)
        metrics = yaml.safe_load((d / "metrics.json").read_text())
        assert (
            metrics["status"] == "finished"
            and metrics["steps"] == cfg["branch"]["at"] + cfg["optim"]["decay_steps"]
        )
        assert metrics["branch"]["trunk"] == str(Path(cfg["branch_from"]).resolve())

    # the oracle: compute saved from the job directories' own configs, not the sweep's record
    per_step = {c["data"]["batch_size"] * c["model"]["block_size"] for c in map(job_config, dirs)}
    assert len(per_step) == 1
    separate = sum(job_config(d)["branch"]["at"] + job_config(d)["optim"]["decay_steps"] for d in branches)
    run = sum(job_config(d)["trainer"]["max_steps"] for d in trunks)
    run += sum(job_config(d)["optim"]["decay_steps"] for d in branches)
    report = (sweep / "report.md").read_text()
    found = re.search(r"Compute saved: ([\d,]+) steps \(([\d,]+) tokens\)", report)
    assert found, report[:2000]
    assert int(found[1].replace(",", "")) == separate - run == 24
    assert int(found[2].replace(",", "")) == (separate - run) * per_step.pop()
    # and from what each job ran (metrics.json's steps): a trunk its steps, a branch the steps past
    # its branch point; separate runs would have run each branch's steps from 0
    steps = {d.name: yaml.safe_load((d / "metrics.json").read_text())["steps"] for d in dirs}
    ran = sum(steps[d.name] for d in trunks) + sum(
        steps[d.name] - job_config(d)["branch"]["at"] for d in branches
    )
    assert sum(steps[d.name] for d in branches) - ran == int(found[1].replace(",", ""))

    # loss against tokens: a row per budget, each arm's mean at its best LR equal to the mean of
    # that budget's branches' final val loss (one LR here: every seed's branch)
    from tests.printed import within_half_unit

    table = report.split("### Final val loss against tokens")[1].split("\n\n")[1].splitlines()[2:]
    assert [r.split("|")[1].strip() for r in table] == ["8", "16"]
    for row, budget in zip(table, (8, 16), strict=True):
        cells = [c.strip() for c in row.split("|")[1:-1]]
        for arm, cell in zip(("gelu", "swiglu"), cells[2:4], strict=True):
            losses = [
                yaml.safe_load((d / "metrics.json").read_text())["final_val_loss"]
                for d in branches
                if job_config(d)["trainer"]["max_steps"] == budget and job_config(d)["model"]["ffn"] == arm
            ]
            assert len(losses) == 2
            assert within_half_unit(cell.split()[0], sum(losses) / 2)
        assert re.search(r": (within noise|better|worse)$", cells[4])
    assert (sweep / "figures" / "budget_ffn_quick_val_loss_vs_tokens.png").is_file()
    # two budgets: no L(D) fit, said so (tests/analysis/test_budget_fit.py checks the fit itself)
    assert "**No fit**: not fitted: 2 budget(s); E + B·D^(−β) has three parameters" in report

    status = run_script("scripts/status.py", str(sweep))
    assert status.returncode == 0, status.stderr
    assert "trunk seed=1 model/ffn=gelu" in status.stdout and "branch of job 0 " in status.stdout


def logged_config(run_file: Path) -> dict:
    """The config a job's offline wandb run logged, top-level key → value (JSON-decoded)."""
    import json

    from tests.distributed.test_multirun import wandb_records

    config = {}
    for r in wandb_records(run_file):
        kind = r.WhichOneof("record_type")
        items = r.run.config.update if kind == "run" else r.config.update if kind == "config" else []
        for i in items:
            config[i.key or i.nested_key[0]] = json.loads(i.value_json)
    return config


@pytest.mark.slow
def test_budget_sweep_view_names_trunks_and_branches(budget_sweep) -> None:
    """The sweep's wandb view pins the columns that tell a trunk from a branch, and plots the final
    val loss against trainer.max_steps; oracle: the config each job's wandb run logged."""
    from gptlab.dashboards.view import VIEW_FILE, config_keys, from_json

    sweep, _ = budget_sweep
    view = from_json((sweep / VIEW_FILE).read_text())
    pinned = view.runset_settings.pinned_columns
    assert {"config:branch_from", "config:branch.at", "config:trainer.max_steps"} <= set(pinned)
    (question,) = [s for s in view.sections if s.name == "The question"]
    (budget,) = [p for p in question.panels if "against trainer.max_steps" in getattr(p, "title", "")]
    assert budget.x.name == "trainer.max_steps" and "branches at their budget (8, 16)" in budget.title
    # what the columns read, per job's run: a branch its trunk's dir and point, a trunk none
    seen = {}
    for run_file in sorted(sweep.glob("*/wandb/offline-run-*/run-*.wandb")):
        job = run_file.relative_to(sweep).parts[0]
        config = logged_config(run_file)
        assert {k.split(".")[0] for k in config_keys(view)} <= set(config)
        cfg = job_config(sweep / job)
        seen[job] = (config["branch_from"], config["branch"]["at"], config["trainer"]["max_steps"])
        if cfg.get("branch_from"):
            assert seen[job] == (cfg["branch_from"], cfg["branch"]["at"], cfg["trainer"]["max_steps"])
        else:
            assert seen[job][:2] == (None, None) and seen[job][2] == 12  # the last branch point
    assert sorted(seen, key=int) == [str(k) for k in range(12)]


@pytest.mark.slow
def test_budget_sweep_rerun_skips_finished_and_resumes_the_rest(budget_sweep, tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    shutil.copytree(budget_sweep[0], sweep)
    # branch 11 was killed before its first checkpoint: the re-run starts it from its trunk, alone
    (sweep / "11" / "metrics.json").unlink()
    shutil.rmtree(sweep / "11" / "checkpoints")
    cache = budget_sweep[0].parent / "token-cache"
    proc = train_py_run_here(
        "-m", "experiment=budget_ffn_quick", f"hydra.sweep.dir={sweep}", f"data.cache_dir={cache}", NO_TASKS,
        env=QUICK_ENV,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    log = proc.stdout + proc.stderr
    assert len(re.findall(r"job \d+ finished in an earlier run of this sweep: skipped", log)) == 11
    assert re.findall(r"\[sweep\] job (\d+) started", log) == ["11"]
    assert yaml.safe_load((sweep / "11" / "metrics.json").read_text())["status"] == "finished"


def final_losses(sweep: Path) -> dict[tuple[str, int, int, bool], float]:
    """(arm, seed, trainer.max_steps, is a branch) → final val loss, from each job's own files."""
    out = {}
    for d in (d for d in sweep.iterdir() if d.name.isdigit()):
        cfg = job_config(d)
        key = (cfg["model"]["ffn"], cfg["seed"], cfg["trainer"]["max_steps"], bool(cfg.get("branch_from")))
        out[key] = yaml.safe_load((d / "metrics.json").read_text())["final_val_loss"]
    return out


@pytest.mark.slow
def test_budget_sweep_under_slurm_submits_the_branches_as_a_second_array(
    budget_sweep, tmp_path: Path
) -> None:
    """hydra/launcher=slurm through the fake SLURM (tests/launcher/fake_slurm.py), one arm and seed:
    the sweeper waits on the trunks' array, then submits the branches whose checkpoints exist as a
    second array; every job's final loss equals the slots launcher's run of the same (arm, seed,
    budget), bit for bit."""
    import os
    import subprocess
    import sys

    pytest.importorskip("hydra_plugins.hydra_submitit_launcher")
    from tests.conftest import REPO
    from tests.launcher.fake_slurm import install

    env = {**os.environ, "PATH": f"{install(tmp_path / 'slurm-bin')}{os.pathsep}{os.environ['PATH']}",
           "FAKE_SLURM_DIR": str(tmp_path / "slurm-state"), "WANDB_MODE": "offline", "WANDB_SILENT": "true",
           **QUICK_ENV}  # fmt: skip
    out, cache = tmp_path / "sweep", budget_sweep[0].parent / "token-cache"
    cmd = [sys.executable, "train.py", "-m", "experiment=budget_ffn_quick", "hydra/launcher=slurm",
           "hydra.launcher.partition=cpu", "trainer.accelerator=cpu", "hydra.sweeper.seeds=1",
           "hydra.sweeper.arms=[gelu]", "logger=csv", NO_TASKS,
           f"hydra.sweep.dir={out}", f"data.cache_dir={cache}"]  # fmt: skip
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    scripts = sorted((tmp_path / "slurm-state" / "sbatch").glob("*.sh"), key=lambda p: int(p.stem))
    arrays = [[x for x in p.read_text().splitlines() if x.startswith("#SBATCH --array=")] for p in scripts]
    # the trunk alone (one task: submitit writes no --array), then its 2 branches as one array
    assert arrays == [[], ["#SBATCH --array=0-1%2"]]
    mine, slots = final_losses(out), final_losses(budget_sweep[0])
    assert len(mine) == 3 and all(mine[k] == slots[k] for k in mine), (mine, slots)
    assert (out / "report.md").is_file()


@pytest.mark.parametrize(
    ("arm", "schedule", "min_lr", "shape"),
    [("cosine", "cosine", 3e-4, None), ("wsd_linear", "wsd", 0.0, "linear"),
     ("wsd_sqrt", "wsd", 0.0, "sqrt"), ("linear_zero", "linear", 0.0, None)],
)  # fmt: skip
def test_schedule_compare_arms_compose(arm: str, schedule: str, min_lr: float, shape: str | None) -> None:
    from tests.test_compose import _compose

    optim = _compose("experiment=schedule_compare", f"optim/schedule={arm}").optim
    assert (optim.schedule, optim.min_lr) == (schedule, min_lr)
    if shape:
        assert (optim.decay_shape, optim.decay_fraction) == (shape, 0.2)
