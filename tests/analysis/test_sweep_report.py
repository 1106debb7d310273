"""End to end: the quick ablation grid (2 arms × 2 LRs × 2 seeds) through the real Hydra multirun
with offline wandb, then its report: composition, rows equal to each job's metrics.json, the
statistics recomputed here from those files, the wandb group and run-config keys, the summary run."""

from __future__ import annotations

import json
import math
import shutil
import statistics
import subprocess
from pathlib import Path

import pytest
from scipy import stats as scipy_stats
from wandb.proto import wandb_internal_pb2

from gptlab.analysis.sweep.jobs import read_csv_log, read_sweep
from gptlab.analysis.sweep.tables import parse_table
from tests.distributed.test_multirun import wandb_records
from tests.in_process import call_main
from tests.printed import Printed

T975_1 = float(scipy_stats.t.ppf(0.975, 1))  # two-sided 95% t quantile, 1 degree of freedom (2 seeds)
INTERVAL = "{:.4f} [{:.4f}, {:.4f}]"  # mean [95% CI], as the report prints it


def report_py(*args: object) -> subprocess.CompletedProcess:
    """`python scripts/report.py <args>` as its `main` in this process (tests/in_process.py); the
    command line's own contract (exit 2, one line) is checked in a process by test_report_edges.py."""
    from gptlab.analysis.sweep_summary import main

    return call_main("scripts/report.py", main, *args)


@pytest.fixture(scope="module")
def sweep(quick_tying_sweep: Path) -> Path:
    """The quick grid, run once per session (tests/conftest.py; default loggers: wandb offline + csv)."""
    return quick_tying_sweep


def _jobs(sweep: Path) -> list[tuple[Path, dict, dict[str, str]]]:
    out = []
    for d in sorted((d for d in sweep.iterdir() if d.name.isdigit()), key=lambda d: int(d.name)):
        m = json.loads((d / "metrics.json").read_text())
        values = dict(o.split("=", 1) for o in m["overrides"])
        out.append((d, m, values))
    return out


@pytest.mark.slow
def test_grid_composition(sweep: Path) -> None:
    jobs = _jobs(sweep)
    assert len(jobs) == 8
    combos = {(v["model/tying"], v["optim.lr"], v["seed"]) for _, _, v in jobs}
    assert combos == {(a, lr, s) for a in ("untied", "tied") for lr in ("0.001", "0.01") for s in ("1", "2")}
    assert all(m["status"] == "finished" for _, m, _ in jobs)
    assert len({m["group"] for _, m, _ in jobs}) == 1
    assert jobs[0][1]["tags"][:4] == ["ablate_tying_quick", "model/tying", "optim.lr", "seed"]


@pytest.mark.slow
def test_report_rows_and_statistics_match_metrics(sweep: Path) -> None:
    text = (sweep / "report.md").read_text()  # written by the sweep itself when it ended
    jobs = _jobs(sweep)
    rows = parse_table(text)
    assert [r["job"] for r in rows] == [d.name for d, _, _ in jobs]
    for r, (_, m, _) in zip(rows, jobs, strict=True):
        assert r["final val loss"] == f"{m['final_val_loss']:.4f}"
        assert r["params"] == f"{m['num_params']:,}" and r["status"] == "finished"
    loss = {(v["model/tying"], float(v["optim.lr"]), v["seed"]): m["final_val_loss"] for _, m, v in jobs}
    lr_rows = {r["arm"]: r for r in parse_table(text, "#### Final val loss by LR, mean [95% CI] over seeds")}
    arm_rows = {r["arm"]: r for r in parse_table(text, "#### Arms")}
    best = {}
    for arm in ("untied", "tied"):
        means = {lr: statistics.fmean([loss[(arm, lr, s)] for s in ("1", "2")]) for lr in (0.001, 0.01)}
        for lr, mean in means.items():
            vals = [loss[(arm, lr, s)] for s in ("1", "2")]
            half = T975_1 * statistics.stdev(vals) / math.sqrt(2)
            assert lr_rows[f"`{arm}`"][f"lr {lr:.3g}"] == Printed(INTERVAL, mean, mean - half, mean + half)
        best[arm] = min(means, key=means.get)
        assert arm_rows[f"`{arm}`"]["best LR"].split()[0] == f"{best[arm]:.3g}"
        # Wortsman LR sensitivity per seed (nothing diverged here), then the mean over seeds
        sens = [
            max(loss[(arm, lr, s)] for lr in (0.001, 0.01)) / 2
            - min(loss[(arm, lr, s)] for lr in (0.001, 0.01)) / 2
            for s in ("1", "2")
        ]
        sens_cell = arm_rows[f"`{arm}`"]["LR sensitivity, mean [95% CI] over seeds"]
        assert sens_cell.split(" [")[0] == Printed("{:.4f}", statistics.fmean(sens))
    (cmp_row,) = parse_table(text, "#### Against the baseline")
    diffs = [loss[("tied", best["tied"], s)] - loss[("untied", best["untied"], s)] for s in ("1", "2")]
    d, half = statistics.fmean(diffs), T975_1 * statistics.stdev(diffs) / math.sqrt(2)
    assert cmp_row["arm"] == "`tied`" and cmp_row["test"] == "paired t (n=2)"
    delta = cmp_row["Δ final val loss (arm − baseline), mean [95% CI]"]
    assert delta == Printed(INTERVAL, d, d - half, d + half)
    expected = "better" if d + half < 0 else "worse" if d - half > 0 else "within noise"
    assert cmp_row["verdict"] == expected
    assert (sweep / "figures" / "ablate_tying_quick_val_loss_vs_lr.png").stat().st_size > 1000


def _config(records: list[wandb_internal_pb2.Record]) -> dict[str, object]:
    (run,) = [r.run for r in records if r.WhichOneof("record_type") == "run"]
    items = {item.key: json.loads(item.value_json) for item in run.config.update}
    return {k: v["value"] if isinstance(v, dict) and set(v) == {"value"} else v for k, v in items.items()}


@pytest.mark.slow
def test_wandb_one_group_ablation_keys_and_summary_run(sweep: Path) -> None:
    groups = set()
    for d, _, v in _jobs(sweep):
        (f,) = d.glob("wandb/offline-run-*/run-*.wandb")
        records = wandb_records(f)
        (run,) = [r.run for r in records if r.WhichOneof("record_type") == "run"]
        groups.add(run.run_group)
        config = _config(records)
        assert config["arm"] == v["model/tying"] and config["arm_key"] == "model/tying"
        assert config["lr"] == pytest.approx(float(v["optim.lr"]))
        assert config["seed"] == int(v["seed"])
    assert groups == {m["group"] for _, m, _ in _jobs(sweep)}
    (summary,) = sweep.glob("wandb/offline-run-*/run-*.wandb")
    records = wandb_records(summary)
    (run,) = [r.run for r in records if r.WhichOneof("record_type") == "run"]
    assert run.run_group in groups and run.job_type == "report"
    assert any(r.WhichOneof("record_type") == "history" for r in records)  # the figures were logged


@pytest.mark.slow
def test_report_marks_missing_and_truncated_jobs(sweep: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    shutil.copytree(sweep, broken)
    (broken / "1" / "metrics.json").unlink()  # a job that was killed before it finished
    csv_path = broken / "2" / "csv" / "metrics.csv"
    text = csv_path.read_text()
    csv_path.write_text(text[: len(text) - 7])  # cut mid-line, as a crash mid-write would
    (broken / "3" / "metrics.json").write_text('{"status": "failed", "error": "error: boom"}\n')
    m5 = json.loads((broken / "5" / "metrics.json").read_text())
    (broken / "5" / "metrics.json").write_text(json.dumps({**m5, "diverged": True}))
    proc = report_py(str(broken), "figures=false")
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = (broken / "report.md").read_text()
    rows = {r["job"]: r for r in parse_table(report)}
    assert rows["1"]["status"].startswith("missing: no metrics.json")
    assert "truncated" in rows["2"]["status"]
    assert rows["3"]["status"] == "failed: error: boom"
    assert rows["5"]["status"] == "diverged"
    lr_rows = {
        r["arm"]: r for r in parse_table(report, "#### Final val loss by LR, mean [95% CI] over seeds")
    }
    # job 1 = untied, lr 0.01, seed 1 (no result); job 5 = untied, lr 0.01, seed 2 (diverged):
    # that cell has no finished seed left, and says why instead of averaging anything
    assert lr_rows["`untied`"]["lr 0.01"] == "diverged 1/2, no result 1/2"
    arms = {r["arm"]: r for r in parse_table(report, "#### Arms")}
    assert arms["`untied`"]["best LR"].startswith("0.001")  # the only LR with every seed's result
    assert arms["`untied`"]["diverged / no result (all LRs)"] == "1 / 1"


@pytest.mark.slow
def test_verdict_with_a_missing_or_nan_job_is_not_better_or_worse(sweep: Path, tmp_path: Path) -> None:
    """Issue 25's reproduction on the real quick sweep: a deleted metrics.json at untied's best LR,
    or a NaN at tied's, gives no better/worse; the verdict names the arm, LR and seed."""
    jobs = _jobs(sweep)
    loss = {(v["model/tying"], v["optim.lr"], v["seed"]): (d, m) for d, m, v in jobs}

    def best(arm: str) -> str:
        mean = {lr: sum(loss[(arm, lr, s)][1]["final_val_loss"] for s in "12") for lr in ("0.001", "0.01")}
        return min(mean, key=mean.__getitem__)

    for arm, seed, expected in (
        ("untied", "2", "incomplete: untied lr {lr} seed 2 missing"),
        ("tied", "1", "inconclusive (partial curve): tied lr {lr} seed 1 non-finite loss"),
    ):
        broken = tmp_path / arm
        shutil.copytree(sweep, broken)
        lr = best(arm)
        path = broken / loss[(arm, lr, seed)][0].name / "metrics.json"
        if arm == "untied":
            path.unlink()
        else:
            path.write_text(json.dumps({**loss[(arm, lr, seed)][1], "final_val_loss": math.nan}))
        proc = report_py(str(broken), "figures=false")
        assert proc.returncode == 0, proc.stderr[-3000:]
        (row,) = parse_table((broken / "report.md").read_text(), "#### Against the baseline")
        assert row["verdict"] == expected.format(lr=f"{float(lr):.3g}")
        assert row["jobs with a result"] == "7 of 8"


def test_csv_reader_drops_a_cut_line_and_joins_resume_parts(tmp_path: Path) -> None:
    path = tmp_path / "metrics.csv"
    path.write_text("step,train/loss,val/loss\n0,5.5,\n1,5.25,5.4\n2,5.12")
    series, problems = read_csv_log(path)
    assert series["train/loss"] == [(0, 5.5), (1, 5.25)]  # "5.12" might be "5.1234…" cut short
    assert any("truncated" in p for p in problems)
    (tmp_path / "metrics.part-0.csv").write_text("step,train/loss\n0,5.5\n1,5.2\n2,5.1\n3,5.0\n")
    path.write_text("step,train/loss\n2,5.11\n3,5.01\n4,4.9\n")  # resumed from the step-1 checkpoint
    series, _ = read_csv_log(path)
    assert series["train/loss"] == [(0, 5.5), (1, 5.2), (2, 5.11), (3, 5.01), (4, 4.9)]


def test_planned_jobs_not_started_are_listed(tmp_path: Path) -> None:
    """A sweep dir with only the grid record (nothing ran yet) lists every planned job as not started."""
    from gptlab.ablation.grid import build_grid
    from gptlab.ablation.sweep_dir import write_record

    grid = build_grid("model/placement", ["pre", "post"], None, ["0.001", "0.01"], ["1"], {}, [])
    write_record(tmp_path, grid, "g")
    jobs = read_sweep(tmp_path)
    assert len(jobs) == 4 and all(j.status == "not started" for j in jobs)
    assert {j.values["model/placement"] for j in jobs} == {"pre", "post"}


def _two_depth_sweep(root: Path) -> dict[tuple[str, str, str, str], float]:
    """A two-depth ablate_init-like sweep written as files (no training): (depth, arm, lr, seed) → loss.
    8 layers beat 2 for global, not for none; the per-seed noise is doubled at depth 8."""
    from gptlab.ablation.grid import build_grid
    from gptlab.ablation.sweep_dir import write_record

    grid = build_grid(
        "model.depth_scaled_init", ["none", "global"], None, ["0.001", "0.003"], ["1", "2", "3"],
        {"model.n_layer": ["2", "8"]}, [],
    )  # fmt: skip
    write_record(root, grid, "g")
    base = {("2", "none"): 2.10, ("8", "none"): 2.11, ("2", "global"): 2.05, ("8", "global"): 1.95}
    lr_cost = {"0.001": 0.03, "0.003": 0.0}
    noise = {"1": 0.012, "2": -0.007, "3": 0.004}
    loss = {}
    for k, overrides in enumerate(grid.jobs()):
        v = dict(o.split("=", 1) for o in overrides)
        key = (v["model.n_layer"], v["model.depth_scaled_init"], v["optim.lr"], v["seed"])
        depth_noise = noise[v["seed"]] * (2.0 if v["model.n_layer"] == "8" else 1.0)
        loss[key] = base[key[:2]] + lr_cost[key[2]] + depth_noise
        (root / str(k)).mkdir()
        metrics = {
            "status": "finished",
            "final_val_loss": loss[key],
            "overrides": overrides,
            "vocab_size": 256,
        }
        (root / str(k) / "metrics.json").write_text(json.dumps(metrics))
    return loss


def _paired(diffs: list[float]) -> Printed:
    t975 = scipy_stats.t.ppf(0.975, len(diffs) - 1)
    d, half = statistics.fmean(diffs), t975 * statistics.stdev(diffs) / math.sqrt(len(diffs))
    return Printed(INTERVAL, d, d - half, d + half)


def test_across_cells_table_is_the_depth_check(tmp_path: Path) -> None:
    """Its "Across cells" rows are (n_layer=8 − n_layer=2) per arm, each at its own best LR, paired
    over seeds, recomputed here from the numbers written."""
    loss = _two_depth_sweep(tmp_path)
    proc = report_py(str(tmp_path), "figures=false")
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = {r["arm"]: r for r in parse_table((tmp_path / "report.md").read_text(), "### Across cells")}
    for arm, expected in (("global", "better"), ("none", "within noise")):
        diffs = [loss[("8", arm, "0.003", s)] - loss[("2", arm, "0.003", s)] for s in ("1", "2", "3")]
        row = rows[f"`{arm}`"]
        assert row["cells"] == "model.n_layer=8 − model.n_layer=2" and row["test"] == "paired t (n=3)"
        assert row["Δ final val loss (cell − reference), mean [95% CI]"] == _paired(diffs)
        assert row["verdict"] == expected


def test_report_baseline_option_compares_with_another_arm(tmp_path: Path) -> None:
    loss = _two_depth_sweep(tmp_path)
    proc = report_py(str(tmp_path), "figures=false", "baseline=global")
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = (tmp_path / "report.md").read_text()
    (row,) = parse_table(text, "#### Against the baseline")  # the first cell: n_layer=2
    diffs = [loss[("2", "none", "0.003", s)] - loss[("2", "global", "0.003", s)] for s in ("1", "2", "3")]
    assert row["arm"] == "`none`" and row["baseline"] == "`global`"
    assert row["Δ final val loss (arm − baseline), mean [95% CI]"] == _paired(diffs)
    elsewhere = tmp_path / "elsewhere"
    bad = report_py(str(tmp_path), f"out={elsewhere}", "baseline=per_layer")
    lines = [ln for ln in bad.stderr.splitlines() if ln.strip()]
    assert bad.returncode == 2 and len(lines) == 1 and "baseline='per_layer' is not an arm" in lines[0]
    assert "none, global" in lines[0]
    assert not elsewhere.exists()  # refused before anything is written


def test_report_seeds_option_judges_the_named_seeds_alone(tmp_path: Path) -> None:
    """seeds=1,2: a sweep stopped before its last seed is judged on the seeds it finished, with a
    line saying so; the paired interval is over those seeds (n=2), recomputed here; a seed that is
    not planned is one line, exit 2, nothing written."""
    loss = _two_depth_sweep(tmp_path)
    proc = report_py(str(tmp_path), "figures=false", "seeds=1,2")
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = (tmp_path / "report.md").read_text()
    assert "Judged on seeds 1, 2 of the planned 1, 2, 3 (`seeds=1,2`): the 8 job(s)" in text
    (row,) = parse_table(text, "#### Against the baseline")  # the first cell: n_layer=2
    diffs = [loss[("2", "global", "0.003", s)] - loss[("2", "none", "0.003", s)] for s in ("1", "2")]
    assert row["test"] == "paired t (n=2)" and row["jobs with a result"] == "8 of 8"
    assert row["Δ final val loss (arm − baseline), mean [95% CI]"] == _paired(diffs)
    elsewhere = tmp_path / "elsewhere"
    bad = report_py(str(tmp_path), f"out={elsewhere}", "seeds=1,4")
    lines = [ln for ln in bad.stderr.splitlines() if ln.strip()]
    assert bad.returncode == 2 and len(lines) == 1 and "seeds='1,4' is not accepted" in lines[0]
    assert "(its seeds: 1, 2, 3)" in lines[0] and not elsewhere.exists()


@pytest.mark.slow
def test_the_quick_sweep_reports_the_default_task(sweep: Path) -> None:
    """Issue 38's 'a quick sweep reports a task': every job of the real quick grid scored the default
    task (val_continuation, 300 items of 4 choices: its one val document gives passages apart), and
    each row of the report's task table is the seed mean of that arm's jobs at the row's LR, read here
    from the jobs' metrics.json, with the LR the best of that arm's seed means by the row's metric."""
    jobs = _jobs(sweep)
    for _, m, _ in jobs:
        task = m["tasks"]["val_continuation"]
        assert (task["items"], task["chance"], task["step"]) == (300, 0.25, m["steps"])
    text = (sweep / "report.md").read_text()
    rows = parse_table(text, "### Task `val_continuation`")
    assert {(r["metric"], r["arm"].strip("`")) for r in rows} == {
        (metric, arm) for metric in ("acc_norm", "acc", "bpb") for arm in ("untied", "tied")
    }
    for r in rows:
        metric, arm = r["metric"], r["arm"].strip("`")
        by_lr: dict[str, list[float]] = {}
        for _, m, v in jobs:
            if v["model/tying"] == arm:
                by_lr.setdefault(v["optim.lr"], []).append(m["tasks"]["val_continuation"][metric])
        means = {lr: statistics.mean(xs) for lr, xs in by_lr.items()}
        best = min(means.values()) if metric == "bpb" else max(means.values())
        lr = r["best LR (by this metric)"].split()[0]
        chosen = next(k for k in means if float(k) == pytest.approx(float(lr)))
        assert means[chosen] == best  # the row's LR has the arm's best seed mean (ties: either LR)
        assert r["mean [95% CI] at best LR"].startswith(f"{best:.4f} [")
