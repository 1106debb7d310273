"""The ladder report's held-out rung on hand-made sweeps (tests/analysis/test_ladder_report.py's
`make_sweep`: each job's loss drawn from a known law in N plus seed noise and an LR penalty that puts
every rung's best LR in its middle). Oracles: scipy's curve_fit on the same per-seed points for the
forecast's value, the known law for the measurement, and a ladder whose top rung breaks off the law
by a known amount for a forecast that must miss."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from scipy.optimize import curve_fit

from gptlab.analysis.report import write_report
from tests.analysis.test_ladder_report import _law, _num, _rows, make_sweep, n_of
from tests.conftest import run_script

HEADING = "### Held-out rung: the fit's forecast against the run"
FIVE = [24, 48, 72, 96, 120]
A = 1.0 * n_of(24) ** 0.3
LAWS = {"gelu": (1.8, A, 0.3), "swiglu": (1.8, 0.8 * A, 0.3)}


def best_points(root: Path, width: int, arm: str) -> list[float]:
    """Per-seed losses at the rung's middle LR (its best by construction), read from the jobs."""
    out = []
    for job in root.iterdir():
        if not (job / "metrics.json").is_file():
            continue
        v = dict(o.split("=", 1) for o in yaml.safe_load((job / ".hydra" / "overrides.yaml").read_text()))
        if int(v["model.n_embd"]) == width and v["model/ffn"] == arm:
            out.append(
                (float(v["optim.lr"]), json.loads((job / "metrics.json").read_text())["final_val_loss"])
            )
    lrs = sorted({lr for lr, _ in out})
    return [loss for lr, loss in out if lr == lrs[1]]


def scipy_forecast(root: Path, widths: list[int], arm: str, at: int) -> float:
    n = np.array([n_of(d) for d in widths for _ in best_points(root, d, arm)], dtype=float)
    y = np.array([x for d in widths for x in best_points(root, d, arm)])
    params, _ = curve_fit(_law, n, y, p0=(1.8, A, 0.3), maxfev=20000)
    return float(_law(n_of(at), *params))


def test_five_rungs_on_a_law_forecast_the_top_two_and_are_covered(tmp_path: Path) -> None:
    make_sweep(tmp_path, LAWS, widths=FIVE)
    rows = _rows(write_report(tmp_path, figures=False), HEADING)
    held = {(r["held-out rung"].split(" ")[0], r["quantity"]): r for r in rows}
    assert sorted({k[0] for k in held}) == ["model.n_embd=120", "model.n_embd=96"]  # leave-one-out, top two
    assert held[("model.n_embd=120", "`gelu`")]["fitted on"] == "24, 48, 72, 96"
    assert held[("model.n_embd=96", "`gelu`")]["fitted on"] == "24, 48, 72, 120"
    for rung in (96, 120):
        others = [d for d in FIVE if d != rung]
        for arm in LAWS:
            r = held[(f"model.n_embd={rung}", f"`{arm}`")]
            f, m = _num(r["forecast [95% CI]"]), _num(r["measured [95% CI]"])
            assert f[0] == pytest.approx(scipy_forecast(tmp_path, others, arm, rung), abs=2e-3)
            assert m[0] == pytest.approx(np.mean(best_points(tmp_path, rung, arm)), abs=1e-4)
            assert m[0] == pytest.approx(_law(n_of(rung), *LAWS[arm]), abs=0.01)
            assert float(r["error"]) == pytest.approx(m[0] - f[0], abs=1e-4)
            assert r["covered"] == "yes" and f[1] <= m[0] <= f[2]
            assert r["curve"] == "power law"
        gap = held[(f"model.n_embd={rung}", "`swiglu − gelu`")]
        assert _num(gap["measured [95% CI]"])[0] == pytest.approx(-0.2 * A * n_of(rung) ** -0.3, abs=0.006)
        assert gap["covered"] == "yes"


def test_a_top_rung_that_breaks_off_the_law_is_not_covered_and_the_error_is_the_break(tmp_path: Path) -> None:
    """The largest rung sits 0.1 above gelu's law (a curve that stops falling): the 3-rung fit cannot
    know it, so the forecast misses by about 0.1 and its interval does not cover the run."""
    top = n_of(96)
    laws = {"gelu": lambda n: _law(n, *LAWS["gelu"]) + (0.1 if n >= top else 0.0), "swiglu": LAWS["swiglu"]}
    make_sweep(tmp_path, laws)
    rows = _rows(write_report(tmp_path, figures=False), HEADING)
    assert {r["held-out rung"] for r in rows} == {f"model.n_embd=96 (N={top:,})"}  # 4 rungs: the top only
    by = {r["quantity"]: r for r in rows}
    assert float(by["`gelu`"]["error"]) == pytest.approx(0.1, abs=0.01)
    assert by["`gelu`"]["covered"] == "**no**"
    assert by["`swiglu`"]["covered"] == "yes"
    assert float(by["`swiglu − gelu`"]["error"]) == pytest.approx(-0.1, abs=0.015)
    assert by["`swiglu − gelu`"]["covered"] == "**no**"


def test_three_rungs_leave_nothing_to_hold_out(tmp_path: Path) -> None:
    make_sweep(tmp_path, LAWS, widths=[24, 48, 72])
    assert HEADING not in write_report(tmp_path, figures=False).read_text()


def test_the_forecast_recorded_before_a_rung_runs_is_the_held_out_sections_forecast(tmp_path: Path) -> None:
    """scripts/ladder_forecast.py on the sweep before its top rung has results prints the numbers
    the held-out section shows once it has them (the pre-registered forecast is the checked one)."""
    import shutil

    full, before = tmp_path / "full", tmp_path / "before"
    make_sweep(full, LAWS, widths=FIVE)
    shutil.copytree(full, before)
    for job in before.iterdir():
        if job.is_dir() and "model.n_embd=120" in (job / ".hydra" / "overrides.yaml").read_text():
            (job / "metrics.json").unlink()  # the rung to come: planned, not run
    proc = run_script("scripts/ladder_forecast.py", str(before), str(n_of(120)))
    assert proc.returncode == 0, proc.stderr[-2000:]
    printed = {line[:20].strip(): line[20:].strip() for line in proc.stdout.splitlines()[1:]}
    assert proc.stdout.splitlines()[0].startswith(
        f"forecast at N={n_of(120):,} from rungs 24, 48, 72, 96 of "
    )
    rows = _rows(write_report(full, figures=False), HEADING)
    held = {r["quantity"].strip("`"): r for r in rows if r["held-out rung"].startswith("model.n_embd=120")}
    assert printed["gelu"].startswith(held["gelu"]["forecast [95% CI]"])
    assert printed["swiglu"].startswith(held["swiglu"]["forecast [95% CI]"])
    assert printed["swiglu − gelu"].startswith(held["swiglu − gelu"]["forecast [95% CI]"])


def test_forecast_cli_bad_input_is_one_line_exit_2(tmp_path: Path) -> None:
    proc = run_script("scripts/ladder_forecast.py", str(tmp_path), "1e6")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"error: {tmp_path} holds no ladder sweep (no ablation.json with a ladder)"
    ]


def seed_points(root: Path, width: int, arm: str) -> dict[str, float]:
    """Per-seed losses at the rung's best LR (the lowest mean over seeds), keyed by seed."""
    by_lr: dict[float, dict[str, float]] = {}
    for job in root.iterdir():
        if not (job / "metrics.json").is_file():
            continue
        v = dict(o.split("=", 1) for o in yaml.safe_load((job / ".hydra" / "overrides.yaml").read_text()))
        if int(v["model.n_embd"]) == width and v["model/ffn"] == arm:
            loss = json.loads((job / "metrics.json").read_text())["final_val_loss"]
            by_lr.setdefault(float(v["optim.lr"]), {})[v["seed"]] = loss
    return min(by_lr.values(), key=lambda seeds: float(np.mean(list(seeds.values()))))


def bootstrap_interval(d: np.ndarray) -> tuple[float, float, float]:
    """mean ± t(0.975, n−1)·SE, SE the spread of the mean over every ordered resample of the n
    per-seed values (each resample moved to m + sqrt(n/(n−1))·(mean − m)), written out here."""
    from itertools import product

    from scipy import stats

    n, m = len(d), float(d.mean())
    means = np.array([d[list(draw)].mean() for draw in product(range(n), repeat=n)])
    se = float(np.sqrt(n / (n - 1)) * means.std())
    half = float(stats.t.ppf(0.975, n - 1)) * se
    return m, m - half, m + half


def test_the_held_out_gaps_measured_interval_is_the_paired_bootstrap_of_arm_minus_baseline(
    tmp_path: Path,
) -> None:
    """The measured gap at a held-out rung: swiglu − gelu seed by seed (a seed's data order is shared
    by both arms, so the pair's difference varies less than either loss), bootstrapped here with
    numpy over every resample of the 3 seeds and checked against scipy's t interval of the mean
    difference. An interval from one arm's resamples alone is wider: the test checks it can tell."""
    from scipy import stats

    make_sweep(tmp_path, LAWS, widths=FIVE)
    rows = _rows(write_report(tmp_path, figures=False), HEADING)
    held = {(r["held-out rung"].split(" ")[0], r["quantity"]): r for r in rows}
    for rung in (96, 120):
        arm, base = seed_points(tmp_path, rung, "swiglu"), seed_points(tmp_path, rung, "gelu")
        assert sorted(arm) == sorted(base) and len(arm) == 3
        d = np.array([arm[s] - base[s] for s in sorted(arm)])
        value, low, high = bootstrap_interval(d)
        t_low, t_high = stats.t.interval(0.95, len(d) - 1, loc=d.mean(), scale=stats.sem(d))
        assert (low, high) == pytest.approx((t_low, t_high), abs=1e-12)  # the same interval, by formula
        shown = _num(held[(f"model.n_embd={rung}", "`swiglu − gelu`")]["measured [95% CI]"])
        assert shown == pytest.approx((value, low, high), abs=1.5e-4)  # 4 decimals printed
        one_arm = np.array([arm[s] for s in sorted(arm)])
        _, a_low, a_high = bootstrap_interval(one_arm)
        assert abs((a_high - a_low) - (high - low)) > 1e-3  # the unpaired width would not pass


def test_the_forecast_gaps_interval_is_the_paired_bootstrap_of_arm_minus_baseline(tmp_path: Path) -> None:
    """scripts/ladder_forecast.py's gap at a rung to come: in each of the 27 ordered resamples of the
    3 seeds (one draw for every rung and arm, each value moved to m + sqrt(3/2)·(v − m) around its
    cell's mean), each arm's curve fitted again, here by scipy's curve_fit, and swiglu − gelu taken
    at N in that resample; the interval is the point gap ± t(0.975, 2)·SD of those 27 gaps. From
    swiglu's resampled curves alone the interval has another width (about half here: the gap holds
    both arms' fit noise): the test checks it can tell."""
    from itertools import product

    from scipy import stats

    make_sweep(tmp_path, LAWS)  # 4 rungs: d = 24..96; the forecast is for d = 120
    at = n_of(120)
    proc = run_script("scripts/ladder_forecast.py", str(tmp_path), str(at))
    assert proc.returncode == 0, proc.stderr[-2000:]
    printed = {line[:20].strip(): line[20:].strip() for line in proc.stdout.splitlines()[1:]}
    shown = _num(printed["swiglu − gelu"].split("  ")[0])
    assert "of resamples" not in printed["swiglu − gelu"]  # every resample's fit converged

    widths = [24, 48, 72, 96]
    seeds = sorted(seed_points(tmp_path, 24, "gelu"))
    # (arm, rung, seed) at each rung's best LR; the LR penalty (0.05·ln² of the ratio to the middle
    # LR, ≥ 0.035 nats at the neighbours) is 10× the seed noise, so every resample picks it again
    y = {a: np.array([[seed_points(tmp_path, d, a)[s] for s in seeds] for d in widths]) for a in LAWS}
    n = np.repeat([n_of(d) for d in widths], 3).astype(float)

    def at_n(values: np.ndarray) -> float:
        params, _ = curve_fit(_law, n, values.ravel(), p0=(1.8, A, 0.3), maxfev=20000)
        return float(_law(at, *params))

    def resampled(v: np.ndarray, draw: tuple[int, ...]) -> np.ndarray:
        m = v.mean(-1, keepdims=True)
        return m + np.sqrt(3 / 2) * (v[:, list(draw)] - m)

    draws = list(product(range(3), repeat=3))
    arm = np.array([at_n(resampled(y["swiglu"], d)) for d in draws])
    base = np.array([at_n(resampled(y["gelu"], d)) for d in draws])
    value = at_n(y["swiglu"]) - at_n(y["gelu"])
    half = float(stats.t.ppf(0.975, 2)) * float(np.std(arm - base))
    assert shown == pytest.approx((value, value - half, value + half), abs=1.5e-4)  # 4 decimals printed
    one_arm = float(stats.t.ppf(0.975, 2)) * float(np.std(arm))
    assert abs(one_arm - half) > 1e-3  # the unpaired width would not pass
