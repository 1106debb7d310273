"""The report's edges (issue 25, items 2-4), on sweep dirs written here as files (no training): a
comparison that rests on fewer jobs than the grid planned says so and prints no better/worse, one
seed gives no t statistic, the LR-sensitivity interval stays in [0, ln V], and what a diverged run
counts as in LR sensitivity is a stated setting with Wortsman et al.'s min(final, init) as an option.

Every expected number is computed here with statistics/scipy from the losses the test wrote."""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Callable
from pathlib import Path

import pytest
from scipy import stats as scipy_stats

from gptlab.analysis.report import write_report
from gptlab.analysis.sweep.tables import parse_table
from tests.analysis.test_sweep_report import _two_depth_sweep, report_py
from tests.conftest import run_script
from tests.printed import Printed

ENV = {"OMP_NUM_THREADS": "1"}
LRS = ("0.001", "0.003", "0.01")
SEEDS = ("1", "2", "3")
INIT = math.log(256)
CMP = "#### Against the baseline"
DELTA = "Δ final val loss (arm − baseline), mean [95% CI]"
SENS = "LR sensitivity, mean [95% CI] over seeds"
Key = tuple[str, str, str]  # (arm, lr, seed)


def write_sweep(
    root: Path, loss: Callable[[str, str, str], float], seeds: tuple[str, ...] = SEEDS
) -> dict[Key, Path]:
    """An ablate_tying-like sweep (untied baseline, tied) at LRS × seeds; returns each job's dir."""
    from gptlab.ablation.grid import build_grid
    from gptlab.ablation.sweep_dir import write_record

    grid = build_grid("model/tying", ["untied", "tied"], None, list(LRS), list(seeds), {}, [])
    write_record(root, grid, "g")
    dirs = {}
    for k, overrides in enumerate(grid.jobs()):
        v = dict(o.split("=", 1) for o in overrides)
        key = (v["model/tying"], v["optim.lr"], v["seed"])
        d = root / str(k)
        (d / ".hydra").mkdir(parents=True)
        (d / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in overrides))
        metrics = {
            "status": "finished",
            "final_val_loss": loss(*key),
            "overrides": overrides,
            "vocab_size": 256,
        }
        (d / "metrics.json").write_text(json.dumps(metrics))
        dirs[key] = d
    return dirs


# untied's and tied's curves have the same shape (best at 3e-3, 1e-3 worst); tied is 0.01 lower, and
# the seed noise differs between the arms, so the complete comparison is within noise
LR_COST = {"0.001": 0.10, "0.003": 0.0, "0.01": 0.05}
BASE = {"untied": 2.40, "tied": 2.39}
NOISE = {"untied": {"1": 0.004, "2": -0.006, "3": 0.002}, "tied": {"1": -0.006, "2": 0.005, "3": 0.001}}


def tying_loss(arm: str, lr: str, seed: str) -> float:
    return BASE[arm] + LR_COST[lr] + NOISE[arm][seed]


def oracle_best(loss: dict[Key, float], arm: str, seeds: tuple[str, ...] = SEEDS) -> str:
    """The documented rule, written out: lowest mean among the LRs where every seed has a finite loss."""
    complete = [lr for lr in LRS if all(math.isfinite(loss.get((arm, lr, s), math.nan)) for s in seeds)]
    return min(complete, key=lambda lr: statistics.fmean(loss[(arm, lr, s)] for s in seeds))


def paired(a: list[float], b: list[float]) -> tuple[float, float, float]:
    d = [x - y for x, y in zip(a, b, strict=True)]
    m, se = statistics.fmean(d), statistics.stdev(d) / math.sqrt(len(d))
    half = scipy_stats.t.ppf(0.975, len(d) - 1) * se
    return m, m - half, m + half


def oracle_comparison(loss: dict[Key, float]) -> tuple[Printed, str]:
    """(Δ cell text, what the interval alone says) for tied − untied at each one's best LR."""
    bt, bu = oracle_best(loss, "tied"), oracle_best(loss, "untied")
    m, lo, hi = paired([loss[("tied", bt, s)] for s in SEEDS], [loss[("untied", bu, s)] for s in SEEDS])
    alone = "better" if hi < 0 else "worse" if lo > 0 else "within noise"
    return Printed("{:.4f} [{:.4f}, {:.4f}]", m, lo, hi), alone


def report(root: Path, *args: str) -> str:
    proc = report_py(str(root), "figures=false", *args)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return (root / "report.md").read_text()


def test_complete_comparison_keeps_its_verdict(tmp_path: Path) -> None:
    write_sweep(tmp_path, tying_loss)
    loss = {(a, lr, s): tying_loss(a, lr, s) for a in BASE for lr in LRS for s in SEEDS}
    (row,) = parse_table(report(tmp_path), CMP)
    delta, alone = oracle_comparison(loss)
    assert alone == "within noise"  # the oracle's reading of the full grid
    assert row[DELTA] == delta and row["verdict"] == "within noise"
    assert row["test"] == "paired t (n=3)" and row["jobs with a result"] == "18 of 18"


def test_missing_job_at_the_best_lr_gives_no_verdict(tmp_path: Path) -> None:
    """The issue's reproduction: a deleted metrics.json at untied's best LR moves that best LR, and
    the interval alone flips from within noise to better; the verdict must say incomplete instead,
    naming the arm, LR and seed."""
    dirs = write_sweep(tmp_path, tying_loss)
    (dirs[("untied", "0.003", "2")] / "metrics.json").unlink()
    loss = {(a, lr, s): tying_loss(a, lr, s) for a in BASE for lr in LRS for s in SEEDS}
    del loss[("untied", "0.003", "2")]
    assert oracle_best(loss, "untied") == "0.01"  # the best LR moved
    delta, alone = oracle_comparison(loss)
    assert alone == "better"  # what the old report printed
    text = report(tmp_path)
    (row,) = parse_table(text, CMP)
    assert row[DELTA] == delta  # still shown, for what it is
    assert row["verdict"] == "incomplete: untied lr 0.003 seed 2 missing"
    assert row["jobs with a result"] == "17 of 18"
    arms = {r["arm"]: r for r in parse_table(text, "#### Arms")}
    assert arms["`untied`"]["best LR"] == "0.01 (grid edge) (partial curve)"
    assert arms["`tied`"]["best LR"] == "0.003"
    assert "2 of 3 seeds" in arms["`untied`"][SENS]  # seed 2's curve has a hole: left out


def test_nan_at_tieds_best_lr_is_inconclusive_and_marked_diverged(tmp_path: Path) -> None:
    """A NaN final loss (metrics.json's own flag false) at tied's best LR: the interval alone would
    read worse; the verdict reads inconclusive (partial curve), and the job row says diverged yes."""
    dirs = write_sweep(tmp_path, tying_loss)
    path = dirs[("tied", "0.003", "1")] / "metrics.json"
    m = json.loads(path.read_text())
    path.write_text(json.dumps({**m, "final_val_loss": math.nan, "diverged": False}))
    loss = {(a, lr, s): tying_loss(a, lr, s) for a in BASE for lr in LRS for s in SEEDS}
    loss[("tied", "0.003", "1")] = math.nan
    delta, alone = oracle_comparison(loss)
    assert alone == "worse"
    text = report(tmp_path)
    (row,) = parse_table(text, CMP)
    assert row[DELTA] == delta
    assert row["verdict"] == "inconclusive (partial curve): tied lr 0.003 seed 1 non-finite loss"
    assert row["jobs with a result"] == "17 of 18"
    job = next(r for r in parse_table(text) if r["job"] == path.parent.name)
    assert job["status"].startswith("diverged") and job["diverged"] == "yes"  # status: + "no csv/..."


def test_lr_where_every_seed_diverged_is_a_known_point_not_a_gap(tmp_path: Path) -> None:
    """The top LR diverging at every seed of both arms is the normal shape of an LR sweep: the best
    LR cannot be there, so the comparison keeps its verdict (the oracle's, on the finite points);
    one seed more diverging at another LR of tied makes it a gap again."""
    dirs = write_sweep(tmp_path, tying_loss)
    for arm in BASE:
        for s in SEEDS:
            path = dirs[(arm, "0.01", s)] / "metrics.json"
            m = json.loads(path.read_text())
            path.write_text(
                json.dumps({**m, "status": "failed", "diverged": True, "final_val_loss": math.nan})
            )
    loss = {(a, lr, s): tying_loss(a, lr, s) for a in BASE for lr in LRS for s in SEEDS}
    for arm in BASE:
        for s in SEEDS:
            loss[(arm, "0.01", s)] = math.nan
    delta, alone = oracle_comparison(loss)
    (row,) = parse_table(report(tmp_path), CMP)
    assert row[DELTA] == delta and row["verdict"] == alone == "within noise"
    path = dirs[("tied", "0.001", "2")] / "metrics.json"
    m = json.loads(path.read_text())
    path.write_text(json.dumps({**m, "status": "failed", "diverged": True, "final_val_loss": math.nan}))
    (row,) = parse_table(report(tmp_path), CMP)
    assert row["verdict"] == "inconclusive (partial curve): tied lr 0.001 seed 2 non-finite loss"


def test_one_seed_has_no_t_statistic(tmp_path: Path) -> None:
    write_sweep(tmp_path, tying_loss, seeds=("1",))
    text = report(tmp_path)
    (row,) = parse_table(text, CMP)
    d = tying_loss("tied", "0.003", "1") - tying_loss("untied", "0.003", "1")
    assert row[DELTA] == Printed("{:.4f} (n=1, no CI)", d)
    assert row["test"] == "none (1 seed)" and row["verdict"] == "1 seed: no interval"
    assert "df=" not in text and "Welch" not in text.split("## Jobs")[0].split("#### Arms")[1]


def test_across_cells_row_names_the_missing_job_and_its_cell(tmp_path: Path) -> None:
    _two_depth_sweep(tmp_path)
    record = json.loads((tmp_path / "ablation.json").read_text())
    k = next(
        i for i, o in enumerate(record["jobs"])
        if {"model.n_layer=8", "model.depth_scaled_init=global", "optim.lr=0.001", "seed=2"} <= set(o)
    )  # fmt: skip
    (tmp_path / str(k) / "metrics.json").unlink()  # an empty job dir: the planned job reads "not started"
    text = report(tmp_path)
    rows = {r["arm"]: r for r in parse_table(text, "### Across cells")}
    assert rows["`global`"]["verdict"] == "incomplete: global at model.n_layer=8 lr 0.001 seed 2 not started"
    assert rows["`global`"]["jobs with a result"] == "11 of 12"
    assert rows["`none`"]["verdict"] == "within noise" and rows["`none`"]["jobs with a result"] == "12 of 12"


def test_lr_sensitivity_interval_is_clipped_at_zero(tmp_path: Path) -> None:
    """Per-seed sensitivities 0, 0, 0.15 (flat curves for seeds 1-2): the t interval's lower end is
    below 0, which LR sensitivity (a mean minus a minimum) cannot be; the report clips it at 0."""
    bump = {("0.01", "3"): 0.45}

    def loss(arm: str, lr: str, seed: str) -> float:
        return 2.4 + bump.get((lr, seed), 0.0)

    write_sweep(tmp_path, loss)
    per_seed = []
    for s in SEEDS:
        curve = [min(loss("tied", lr, s), INIT) for lr in LRS]
        per_seed.append(statistics.fmean(curve) - min(curve))
    assert per_seed == pytest.approx([0.0, 0.0, 0.15])
    m, se = statistics.fmean(per_seed), statistics.stdev(per_seed) / math.sqrt(3)
    half = scipy_stats.t.ppf(0.975, 2) * se
    assert m - half < 0  # the unclipped t interval leaves the range
    arms = {r["arm"]: r for r in parse_table(report(tmp_path), "#### Arms")}
    assert arms["`tied`"][SENS] == Printed("{:.4f} [{:.4f}, {:.4f}] (clipped)", m, 0.0, m + half)


def _sensitivity(curves: dict[str, list[float | None]]) -> Printed:
    """Wortsman et al.'s formula per seed (None: counted at ln V), then the t interval cut to [0, ln V]."""
    per_seed = []
    for curve in curves.values():
        c = [INIT if v is None or not math.isfinite(v) else min(v, INIT) for v in curve]
        per_seed.append(statistics.fmean(c) - min(c))
    m, se = statistics.fmean(per_seed), statistics.stdev(per_seed) / math.sqrt(len(per_seed))
    half = scipy_stats.t.ppf(0.975, len(per_seed) - 1) * se
    lo, hi = max(m - half, 0.0), min(m + half, INIT)
    clipped = " (clipped)" if (lo, hi) != (m - half, m + half) else ""
    return Printed("{:.4f} [{:.4f}, {:.4f}]" + clipped, m, lo, hi)


def test_diverged_run_in_lr_sensitivity_init_or_wortsman(tmp_path: Path) -> None:
    """untied lr 1e-2 seed 1 is flagged diverged (a train loss above 3× its first) but trains to the
    end at a finite 3.0: the default counts it at ln 256, lr_sensitivity=wortsman at min(3.0, ln 256)."""
    dirs = write_sweep(tmp_path, tying_loss)
    path = dirs[("untied", "0.01", "1")] / "metrics.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "final_val_loss": 3.0, "diverged": True}))
    # seed 2 at 1e-2 was stopped on a non-finite gradient after a validation at 2.5: no final loss,
    # so it counts at ln 256 in both modes
    stopped = dirs[("untied", "0.01", "2")] / "metrics.json"
    m = json.loads(stopped.read_text())
    stop = {"status": "failed", "error": "error: non-finite gradient", "diverged": True}
    stop["final_val_loss"] = 2.5
    stopped.write_text(json.dumps({**m, **stop}))
    base = {s: [tying_loss("untied", lr, s) for lr in LRS] for s in SEEDS}
    base["2"] = [base["2"][0], base["2"][1], None]
    as_init = {**base, "1": [base["1"][0], base["1"][1], None]}
    as_paper = {**base, "1": [base["1"][0], base["1"][1], 3.0]}
    for args, curves in (
        ((), as_init),
        (("lr_sensitivity=init",), as_init),
        (("lr_sensitivity=wortsman",), as_paper),
    ):
        text = report(tmp_path, *args)
        arms = {r["arm"]: r for r in parse_table(text, "#### Arms")}
        assert arms["`untied`"][SENS] == _sensitivity(curves), args
    assert "lr_sensitivity=wortsman, the paper's definition" in text


def test_bad_lr_sensitivity_value_is_one_line_exit_2(tmp_path: Path) -> None:
    write_sweep(tmp_path, tying_loss)
    elsewhere = tmp_path / "elsewhere"
    bad = run_script("scripts/report.py", str(tmp_path), f"out={elsewhere}", "lr_sensitivity=paper", env=ENV)
    lines = [ln for ln in bad.stderr.splitlines() if ln.strip()]
    assert bad.returncode == 2 and len(lines) == 1, bad.stderr
    assert "lr_sensitivity='paper' is not accepted; choose init or wortsman" in lines[0]
    assert not elsewhere.exists()
    with pytest.raises(ValueError, match="lr_sensitivity"):
        write_report(tmp_path, out=elsewhere, figures=False, sensitivity="nope")
    assert not elsewhere.exists()


def test_a_sweep_where_every_job_failed_gets_its_report_and_figure(tmp_path: Path) -> None:
    """Every job killed or failed (seen: a GPU array on a machine without one): the report says so
    job by job and draws the LR figure with no line, instead of stopping on an empty log axis."""
    for path in write_sweep(tmp_path, tying_loss).values():
        (path / "metrics.json").write_text(json.dumps({"status": "failed", "error": "killed by signal 9"}))
    proc = report_py(str(tmp_path), "figures=true")
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = (tmp_path / "report.md").read_text()
    assert "0 finished (incl. diverged), 18 failed, missing or not started" in text
    (figure,) = (tmp_path / "figures").glob("*val_loss_vs_lr.png")
    assert figure.stat().st_size > 1000
