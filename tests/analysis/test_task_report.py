"""The report's downstream-task tables (issue 38, item 4) on sweep dirs written here as files (no
training): each job's metrics.json gets a `tasks` entry (CONTRACT38 §4) whose acc_norm, acc and bpb
the test chose, so each arm's best LR (by that metric, in its direction), the mean and 95% CI there,
the paired difference to the baseline and the verdict have known answers.

Every expected number is computed here with statistics / scipy.stats.t.ppf from the values the test
wrote; the verdict boundaries are placed by the test's values (asserted before the report is read)."""

from __future__ import annotations

import json
import math
import shutil
import statistics
from pathlib import Path

import pytest
from scipy import stats as scipy_stats

from gptlab.analysis.report import write_report
from gptlab.analysis.sweep.tables import parse_table
from tests.analysis.test_report_edges import LRS, SEEDS, tying_loss, write_sweep
from tests.conftest import run_script
from tests.printed import Printed

TASK = "hellaswag_val"
HEAD = f"### Task `{TASK}`"
ARMS = ("untied", "tied")  # untied is the baseline
DELTA = "Δ (arm − baseline), mean [95% CI]"
MEAN = "mean [95% CI] at best LR"
INTERVAL = "{:.4f} [{:.4f}, {:.4f}]"
HIGHER = {"acc_norm": True, "acc": True, "bpb": False}
# (base per arm, LR effect, per-arm seed noise); the best LRs differ between the metrics and from the
# val loss's (0.003): acc_norm highest at 0.01, acc at 0.003, bpb lowest at 0.001 (highest at 0.01)
VALUES = {
    "acc_norm": ({"untied": 0.40, "tied": 0.45}, {"0.001": 0.0, "0.003": 0.02, "0.01": 0.06}),
    "acc": ({"untied": 0.30, "tied": 0.30}, {"0.001": 0.01, "0.003": 0.03, "0.01": 0.0}),
    "bpb": ({"untied": 1.50, "tied": 1.53}, {"0.001": 0.0, "0.003": 0.05, "0.01": 0.20}),
}
NOISE = {"untied": {"1": 0.003, "2": -0.004, "3": 0.001}, "tied": {"1": 0.009, "2": -0.009, "3": 0.002}}
# tied − untied at each one's best LR: acc_norm +0.05 (better), acc 0 (within noise), bpb +0.03 (worse)
EXPECTED = {"acc_norm": "better", "acc": "within noise", "bpb": "worse"}
BEST = {"acc_norm": "0.01", "acc": "0.003", "bpb": "0.001"}  # of both arms, on the full grid
Key = tuple[str, str, str]  # (arm, lr, seed)


def task_value(metric: str, arm: str, lr: str, seed: str) -> float:
    base, lr_effect = VALUES[metric]
    return base[arm] + lr_effect[lr] + NOISE[arm][seed]


def add_tasks(dirs: dict[Key, Path], seeds: tuple[str, ...] = SEEDS) -> dict[str, dict[Key, float]]:
    """Write each job's `tasks` entry; returns metric → (arm, lr, seed) → value."""
    values: dict[str, dict[Key, float]] = {m: {} for m in VALUES}
    for key, d in dirs.items():
        entry = {m: task_value(m, *key) for m in VALUES}
        for m, v in entry.items():
            values[m][key] = v
        path = d / "metrics.json"
        metrics = json.loads(path.read_text())
        tasks = {TASK: {**entry, "items": 200, "chance": 0.25, "step": 50}}
        path.write_text(json.dumps({**metrics, "tasks": tasks}))
    return values


def oracle(values: dict[Key, float], metric: str, seeds: tuple[str, ...] = SEEDS) -> dict[str, object]:
    """The documented rule written out with statistics and scipy: best LR by the metric's direction
    among LRs where every seed has a value; mean and t interval there; paired tied − untied."""
    pick = max if HIGHER[metric] else min
    best = {}
    for arm in ARMS:
        complete = [lr for lr in LRS if all((arm, lr, s) in values for s in seeds)]
        best[arm] = pick(complete, key=lambda lr: statistics.fmean(values[(arm, lr, s)] for s in seeds))

    def interval(xs: list[float]) -> tuple[float, float, float]:
        m = statistics.fmean(xs)
        half = scipy_stats.t.ppf(0.975, len(xs) - 1) * statistics.stdev(xs) / math.sqrt(len(xs))
        return m, m - half, m + half

    at = {arm: [values[(arm, best[arm], s)] for s in seeds] for arm in ARMS}
    d = interval([t - u for t, u in zip(at["tied"], at["untied"], strict=True)])
    sign = 1 if HIGHER[metric] else -1
    alone = (
        "better"
        if sign * d[1] > 0 and sign * d[2] > 0
        else "worse"
        if sign * d[1] < 0 and sign * d[2] < 0
        else "within noise"
    )
    return {"best": best, "mean": {a: interval(at[a]) for a in ARMS}, "delta": d, "verdict": alone}


def rows(text: str, heading: str = HEAD) -> dict[tuple[str, str], dict[str, str]]:
    return {(r["metric"], r["arm"].strip("`")): r for r in parse_table(text, heading)}


def test_each_metric_picks_its_own_best_lr_and_verdict(tmp_path: Path) -> None:
    values = add_tasks(write_sweep(tmp_path, tying_loss))
    text = write_report(tmp_path, figures=False).read_text()
    table = rows(text)
    assert [k[0] for k in table] == ["acc_norm"] * 2 + ["acc"] * 2 + ["bpb"] * 2
    for metric in VALUES:
        o = oracle(values[metric], metric)
        assert o["verdict"] == EXPECTED[metric]  # the test's values put each verdict where intended
        assert o["best"] == {"untied": BEST[metric], "tied": BEST[metric]}
        for arm in ARMS:
            r = table[(metric, arm)]
            assert r["best LR (by this metric)"].split()[0] == f"{float(o['best'][arm]):.3g}"
            assert r[MEAN] == Printed(INTERVAL, *o["mean"][arm]) and r["seeds"] == "3"
        base, arm = table[(metric, "untied")], table[(metric, "tied")]
        assert base[DELTA] == "—" and base["verdict"] == "baseline"
        assert arm[DELTA] == Printed(INTERVAL, *o["delta"])
        assert arm["test"] == "paired t (n=3)" and arm["jobs with a result"] == "18 of 18"
        assert arm["verdict"] == EXPECTED[metric]
    assert "Numbers from 18 of 18 jobs. items: 200; chance: 0.2500." in text
    assert "chosen by that row's metric (the highest mean over seeds for acc and acc_norm, the lowest" in text


def test_jobs_without_the_numbers_are_counted_named_and_not_averaged(tmp_path: Path) -> None:
    """An older run (no `tasks`) at tied's best acc_norm LR, a diverged job that did record task
    numbers, `tasks: {}` and a null bpb: the first moves tied's best LR and makes every comparison
    incomplete; none of them is averaged in."""
    dirs = write_sweep(tmp_path, tying_loss)
    values = add_tasks(dirs)
    older, diverged = dirs[("tied", "0.01", "2")], dirs[("untied", "0.01", "3")]
    empty, null_bpb = dirs[("untied", "0.001", "1")], dirs[("tied", "0.003", "1")]
    for d, edit in (
        (older, lambda m: {k: v for k, v in m.items() if k != "tasks"}),
        (diverged, lambda m: {**m, "diverged": True}),
        (empty, lambda m: {**m, "tasks": {}}),
        (null_bpb, lambda m: {**m, "tasks": {TASK: {**m["tasks"][TASK], "bpb": None}}}),
    ):
        path = d / "metrics.json"
        path.write_text(json.dumps(edit(json.loads(path.read_text()))))
    for key in (("tied", "0.01", "2"), ("untied", "0.01", "3"), ("untied", "0.001", "1")):
        for m in VALUES:
            del values[m][key]
    del values["bpb"][("tied", "0.003", "1")]
    text = write_report(tmp_path, figures=False).read_text()
    absent = f"finished, no `{TASK}` in metrics.json `tasks`"
    why = {
        older: absent,
        empty: absent,
        diverged: "diverged (not averaged)",
        null_bpb: "finished, no finite bpb",
    }
    groups: dict[str, list[str]] = {}
    for d in sorted(why, key=lambda d: int(d.name)):  # grouped by why, in the sweep's job order
        groups.setdefault(why[d], []).append(d.name)
    said = "; ".join(f"job{'s' if len(v) > 1 else ''} {', '.join(v)}: {w}" for w, v in groups.items())
    assert f"Numbers from 14 of 18 jobs; without them: {said}. items: 200; chance: 0.2500." in text
    table = rows(text)
    o = oracle(values["acc_norm"], "acc_norm")
    assert o["best"] == {"untied": "0.003", "tied": "0.003"}  # 0.01 lost a seed in both arms
    tied = table[("acc_norm", "tied")]
    assert tied["best LR (by this metric)"] == "0.003 (partial curve)"
    assert tied[MEAN] == Printed(INTERVAL, *o["mean"]["tied"])
    assert tied[DELTA] == Printed(INTERVAL, *o["delta"])
    assert tied["jobs with a result"] == "15 of 18"
    assert tied["verdict"] == (
        f"incomplete: tied lr 0.01 seed 2 no {TASK} acc_norm; untied lr 0.001 seed 1 no {TASK} acc_norm; "
        "untied lr 0.01 seed 3 diverged"
    )
    bpb = table[("bpb", "tied")]
    assert bpb["jobs with a result"] == "14 of 18" and bpb["verdict"].startswith(
        "incomplete: tied lr 0.003 seed 1"
    )
    o = oracle(values["bpb"], "bpb")
    assert bpb[MEAN] == Printed(INTERVAL, *o["mean"]["tied"])


def test_one_seed_says_there_is_no_interval(tmp_path: Path) -> None:
    values = add_tasks(write_sweep(tmp_path, tying_loss, seeds=("1",)), seeds=("1",))
    table = rows(write_report(tmp_path, figures=False).read_text())
    for metric in VALUES:
        pick = max if HIGHER[metric] else min
        best = {a: pick(LRS, key=lambda lr, a=a: values[metric][(a, lr, "1")]) for a in ARMS}
        tied = table[(metric, "tied")]
        assert tied[MEAN] == Printed("{:.4f} (n=1, no CI)", values[metric][("tied", best["tied"], "1")])
        diff = values[metric][("tied", best["tied"], "1")] - values[metric][("untied", best["untied"], "1")]
        assert tied[DELTA] == Printed("{:.4f} (n=1, no CI)", diff)
        assert tied["test"] == "none (1 seed)" and tied["verdict"] == "1 seed: no interval"


def test_a_sweep_without_tasks_has_no_section(tmp_path: Path) -> None:
    dirs = write_sweep(tmp_path / "none", tying_loss)
    assert "## Downstream tasks" not in write_report(tmp_path / "none", figures=False).read_text()
    for d in dirs.values():  # the callback configured with no task: `tasks: {}` everywhere
        path = d / "metrics.json"
        path.write_text(json.dumps({**json.loads(path.read_text()), "tasks": {}}))
    text = write_report(tmp_path / "none", figures=False).read_text()
    assert "## Downstream tasks" not in text and "Task `" not in text


def test_a_plain_sweep_lists_each_jobs_task_numbers(tmp_path: Path) -> None:
    """No ablation grid (a plain multirun): the raw numbers per job, — where a job has none."""
    written = {"0": ("gelu", {"acc": 0.3125, "acc_norm": 0.34, "bpb": 1.72}), "1": ("swiglu", None)}
    for name, (ffn, entry) in written.items():
        d = tmp_path / name
        (d / ".hydra").mkdir(parents=True)
        (d / ".hydra" / "overrides.yaml").write_text(f"- model/ffn={ffn}\n")
        metrics = {"status": "finished", "final_val_loss": 2.5, "overrides": [f"model/ffn={ffn}"]}
        if entry is not None:
            metrics["tasks"] = {TASK: {**entry, "items": 32, "chance": 0.25, "step": 10}}
        (d / "metrics.json").write_text(json.dumps(metrics))
    text = write_report(tmp_path, figures=False).read_text()
    first, second = parse_table(text, "## Downstream tasks by job")
    assert first == {
        "job": "0", "overrides": "`ffn=gelu`", f"{TASK} acc_norm": "0.3400", f"{TASK} acc": "0.3125",
        f"{TASK} bpb": "1.7200", "status": "finished",
    }  # fmt: skip
    assert [second[f"{TASK} {m}"] for m in ("acc_norm", "acc", "bpb")] == ["—"] * 3
    for d in ("0", "1"):  # the callback configured with no task
        path = tmp_path / d / "metrics.json"
        path.write_text(json.dumps({**json.loads(path.read_text()), "tasks": {}}))
    assert "Downstream tasks" not in write_report(tmp_path, figures=False).read_text()


@pytest.mark.slow  # the session's quick sweep (shared); the report itself ~1 s
def test_a_real_sweeps_files_with_tasks_added(quick_tying_sweep: Path, tmp_path: Path) -> None:
    """The quick tying sweep's own files (real metrics.json, real CSV logs) with the task callback's
    output added as CONTRACT38 §3-4 writes it: `tasks` in metrics.json (one job `{}`), and
    `task/<name>/*` columns in the CSV that are empty on every row but the last."""
    sweep = tmp_path / "sweep"
    shutil.copytree(quick_tying_sweep, sweep, ignore=shutil.ignore_patterns("wandb", "*.ckpt"))
    jobs = sorted((d for d in sweep.iterdir() if d.name.isdigit()), key=lambda d: int(d.name))
    for k, d in enumerate(jobs):
        m = json.loads((d / "metrics.json").read_text())
        entry = {"acc": 0.25 + 0.01 * k, "acc_norm": 0.3 + 0.01 * k, "bpb": 2.0 - 0.01 * k, "items": 64,
                 "chance": 0.25, "step": m["steps"] - 1}  # fmt: skip
        tasks = {} if k == 0 else {TASK: entry}
        (d / "metrics.json").write_text(json.dumps({**m, "tasks": tasks}))
        csv_path = d / "csv" / "metrics.csv"
        lines = csv_path.read_text().splitlines()
        cols = [f"task/{TASK}/{x}" for x in ("acc", "acc_norm", "bpb")]
        body = [f"{row},,," for row in lines[1:-1]]
        last = f"{lines[-1]},{entry['acc']},{entry['acc_norm']},{entry['bpb']}"
        csv_path.write_text("\n".join([lines[0] + "," + ",".join(cols), *body, last]) + "\n")
    proc = run_script("scripts/report.py", str(sweep), "figures=false", env={"OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = (sweep / "report.md").read_text()
    assert (
        f"Numbers from 7 of 8 jobs; without them: job 0: finished, no `{TASK}` in metrics.json `tasks`."
        in text
    )
    table = rows(text)
    assert set(table) == {(m, a) for m in ("acc_norm", "acc", "bpb") for a in ARMS}
    assert all(r["jobs with a result"] == "7 of 8" for (_, a), r in table.items() if a == "tied")
    assert all(r["verdict"].startswith("incomplete: ") for (_, a), r in table.items() if a == "tied")
    job_rows = parse_table(text)
    assert all("malformed" not in r["status"] for r in job_rows)  # the CSV's empty task cells are fine
