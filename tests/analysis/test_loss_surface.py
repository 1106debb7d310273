"""Each arm's loss surface over sizes × budgets and its compute-optimal size (gptlab.analysis.budgets
.surface, Hoffmann et al. 2022's Approaches 1 and 3), on synthetic losses with a known law: the fit
against scipy.optimize.least_squares and the truth, N_opt against scipy's minimum of the law at
fixed C, the envelope against a brute force written here, C against 6·N·D with N from the block's
weight shapes, and the bad sweeps refused in one line. The sweeps are hand-made job directories (no
training), built from the sweeper's own grid of a ladder crossed with budgets."""

from __future__ import annotations

import json
import math
import os
import shlex
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import yaml
from scipy.optimize import least_squares, minimize_scalar

from gptlab.ablation.budgets import budget_plan
from gptlab.ablation.grid import Ladder, build_grid, lr_values, seed_values
from gptlab.ablation.sweep_dir import write_record
from gptlab.analysis.budgets import envelope as env
from gptlab.analysis.budgets import surface, surface_data
from gptlab.analysis.budgets.surface_fit import fit_surface
from gptlab.analysis.report import parse_table, write_report
from tests.conftest import REPO

TRUE = {"gelu": (1.6, 60.0, 0.35, 40.0, 0.33), "swiglu": (1.55, 55.0, 0.35, 38.0, 0.33)}  # E, A, α, B, β
PER_STEP = 16 * 64  # batch × block


def law(n, d, e, a, alpha, b, beta):  # noqa: ANN001, ANN201
    return e + a * np.asarray(n, float) ** (-alpha) + b * np.asarray(d, float) ** (-beta)


def n_of(d: int) -> int:
    """Non-embedding parameters of the ladder's rung of width d (L = d/24 pre-norm RMSNorm blocks, no
    biases): per block 4d² attention + 8d² FFN (ungated 2·d·4d, gated 3·d·(8/3)d) + two norm gains,
    and the final norm."""
    layers = d // 24
    return layers * (12 * d * d + 2 * d) + d


def make_sweep(root: Path, widths=(24, 48, 72, 96), steps=(50, 100, 200, 400), seeds: int = 3,
               missing: tuple[int, ...] = (), noise: float = 0.002, clean=None) -> dict:  # fmt: skip
    """A finished sizes × budgets sweep in `root`: the ladder × budgets grid the sweeper builds, a
    job dir per job (the trunks too: their LR held, their loss no budget's), each branch's loss the
    arm's law at (N, D) + seed noise, the first LR best by 0.05·ln(lr/first)²."""
    lrs, ladder = lr_values(1.5e-3, 8.2e-3, 2), Ladder(widths=list(widths))
    grid = build_grid("model/ffn", list(TRUE), "gelu", lrs, seed_values(seeds), {}, [], ladder=ladder,
                      tokens_per_step=PER_STEP, budgets=True)  # fmt: skip
    plan = budget_plan(list(steps), 0.2, warmup=2)
    grid = replace(grid, budgets=[list(p) for p in plan], sweep_dir=str(root))
    write_record(root, grid, "g")
    rng = np.random.default_rng(0)
    shared = {s: rng.normal(0, noise) for s in grid.seeds}
    for k, job in enumerate(grid.jobs()):
        if k in missing:
            continue
        v = dict(o.split("=", 1) for o in job)
        d, arm, lr = int(v["model.n_embd"]), v["model/ffn"], float(v["optim.lr"])
        middle = float(grid.rung_lrs[v["model.n_embd"]][0])
        budget = int(v["trainer.max_steps"])
        truth = (
            clean(n_of(d), budget * PER_STEP) if clean else float(law(n_of(d), budget * PER_STEP, *TRUE[arm]))
        )
        loss = truth + shared[v["seed"]] + rng.normal(0, noise)
        loss += 0.05 * math.log(lr / middle) ** 2 + (0.3 if "branch_from" not in v else 0.0)
        path = root / str(k)
        (path / ".hydra").mkdir(parents=True)
        (path / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(job))
        shape = {"n_embd": d, "n_layer": int(v["model.n_layer"]), "n_head": int(v["model.n_head"])}
        model = {**shape, "ffn": arm, "block_size": 64, "vocab_size": None, "tie_embeddings": True,
                 "pos_emb": "rope"}  # fmt: skip
        config = {"model": model, "data": {"batch_size": 16}, "trainer": {"accumulate_grad_batches": 1}}
        (path / ".hydra" / "config.yaml").write_text(yaml.safe_dump(config))
        metrics = {"status": "finished", "final_val_loss": loss, "vocab_size": 256, "diverged": False,
                   "tokens_seen": float(budget * PER_STEP), "num_params": n_of(d) + 256 * d}  # fmt: skip
        (path / "metrics.json").write_text(json.dumps(metrics))
    return {"grid": grid, "plan": plan}


def synthetic(truth, noise: float, seed: int = 0):  # noqa: ANN001, ANN201
    n = np.repeat([7e3, 5.5e4, 1.9e5, 4.4e5], 4)
    d = np.tile([5.12e4, 1.02e5, 2.05e5, 4.1e5], 4)
    y = law(n, d, *truth) + np.random.default_rng(seed).normal(0, noise, n.size)
    return n, d, y


def test_the_fit_matches_scipy_least_squares_and_recovers_the_law() -> None:
    truth = TRUE["gelu"]
    n, d, y = synthetic(truth, 0.0)
    fit = fit_surface(n, d, y)
    assert bool(fit.converged)
    got = [float(v) for v in (fit.E, fit.A, fit.alpha, fit.B, fit.beta)]
    assert got == pytest.approx(truth, rel=1e-6)  # no noise: the law itself
    n, d, y = synthetic(truth, 0.003)
    fit = fit_surface(n, d, y)

    def resid(p: np.ndarray) -> np.ndarray:
        return law(n, d, *p) - y

    oracle = least_squares(resid, x0=np.array(truth), x_scale="jac", xtol=1e-15, ftol=1e-15, gtol=1e-15)
    got = np.array([float(v) for v in (fit.E, fit.A, fit.alpha, fit.B, fit.beta)])
    assert float(fit.sse) <= 2 * oracle.cost * (1 + 1e-9)  # scipy's cost is SSE/2
    assert got == pytest.approx(oracle.x, rel=2e-3)


def test_the_compute_optimal_size_is_the_laws_minimum_at_fixed_flops() -> None:
    n, d, y = synthetic(TRUE["gelu"], 0.0)
    fit = fit_surface(n, d, y)
    for c in (1e11, 1e13, 1e15):

        def at(log_n: float, c: float = c) -> float:
            return float(law(math.exp(log_n), c / (6 * math.exp(log_n)), *TRUE["gelu"]))

        best = minimize_scalar(at, bounds=(0.0, 40.0), method="bounded", options={"xatol": 1e-10})
        assert float(fit.optimal_n(c)) == pytest.approx(math.exp(best.x), rel=1e-4)


def brute_envelope(sizes, tokens, losses, c):  # noqa: ANN001, ANN201
    """Each size's loss at D = C/(6N) between its bracketing budgets, linear in ln D; the lowest."""
    best, best_loss = None, math.inf
    for r, n in enumerate(sizes):
        target = c / (6 * n)
        for j in range(len(tokens) - 1):
            lo, hi = tokens[j], tokens[j + 1]
            if lo * (1 - 1e-9) <= target <= hi * (1 + 1e-9):  # the grid's own corners included
                t = (math.log(target) - math.log(lo)) / (math.log(hi) - math.log(lo))
                value = losses[r][j] + t * (losses[r][j + 1] - losses[r][j])
                if value < best_loss:
                    best, best_loss = r, value
                break
    return best, best_loss


@pytest.mark.parametrize("truth", [TRUE["gelu"], (1.6, 5.0, 0.35, 4000.0, 0.33)])  # the second: data-hungry
def test_the_envelope_is_the_brute_force_minimum(truth: tuple) -> None:
    sizes, tokens = np.geomspace(1e3, 1e6, 7), np.geomspace(1e4, 1e8, 9)
    losses = law(sizes[:, None], tokens[None, :], *truth)
    flops = env.flops_grid(sizes, tokens, 41)
    points = env.envelope(sizes, tokens, losses, flops)
    visited, bounds = set(), set()
    for p, c in zip(points, flops, strict=True):
        best, value = brute_envelope(sizes, tokens, losses, c)
        assert p.best == (-1 if best is None else best)
        if best is not None:
            assert p.loss == pytest.approx(value, rel=1e-12)
            compared = [
                r
                for r, n in enumerate(sizes)
                if tokens[0] * (1 - 1e-9) <= c / (6 * n) <= tokens[-1] * (1 + 1e-9)
            ]
            assert p.compared == tuple(compared)
            edge = {compared[0]: "≤", compared[-1]: "≥"} if len(compared) > 1 else {compared[0]: "only size"}
            assert p.bound == edge.get(best, "")
            bounds.add(p.bound)
            if not p.bound:
                visited.add(best)
    if truth == TRUE["gelu"]:  # the optimum moves across the sizes: a is fitted through them
        assert len(visited) >= 2 and {"", "≥"} <= bounds
        a, _ = env.fit_exponent(points, sizes)
        est = [(c, sizes[p.best]) for p, c in zip(points, flops, strict=True) if p.best >= 0 and not p.bound]
        assert a == pytest.approx(np.polyfit(np.log([c for c, _ in est]), np.log([n for _, n in est]), 1)[0])
    else:  # the smallest size compared wins everywhere: a bound at every C, no a
        assert "≤" in bounds and "" not in bounds and env.fit_exponent(points, sizes) is None


def test_a_sweep_gives_each_arms_surface_law_and_optimum(tmp_path: Path) -> None:
    made = make_sweep(tmp_path)
    grid = surface_data.read_grid(tmp_path)
    d = np.array([b for b, _, _ in made["plan"]], float) * PER_STEP
    assert grid.d.tolist() == d.tolist()
    assert grid.n[0].tolist() == [n_of(w) for w in (24, 48, 72, 96)]  # the ladder's N
    flops, arms = surface_data.analyse(grid, [1e11, 1e12])
    for arm in arms:
        truth = dict(zip(["E", "A", "α", "B", "β"], TRUE[arm.arm], strict=True))
        assert arm.status == "converged"
        for name, true in truth.items():  # the noise is 0.002: near the truth, intervals around the fit
            est = arm.params[name]
            assert est.value == pytest.approx(true, rel=0.1) and est.low < est.value < est.high, (name, est)
        for o in arm.optima:
            e, a, alpha, b, beta = TRUE[arm.arm]
            g = (alpha * a / (beta * b)) ** (1 / (alpha + beta))
            assert o.n.value == pytest.approx(g * (o.flops / 6) ** (beta / (alpha + beta)), rel=0.25)
            assert o.n.low < o.n.value < o.n.high and o.d.value == pytest.approx(o.flops / (6 * o.n.value))
    # the report's section: a surface table per arm whose cells are the branches' mean loss, C = 6·N·D
    text = "\n".join(surface.surface_lines(grid, flops))
    rows = parse_table(text, "#### Loss surface (final val loss, best LR per cell)")
    assert [r["rung"] for r in rows] == ["24", "48", "72", "96"]
    for r, row in zip((24, 48, 72, 96), rows, strict=True):
        for b in (50, 100, 200, 400):
            cell = row[f"{b} steps, D = {b * PER_STEP:,}"]
            assert cell.endswith(f"(C {6 * n_of(r) * b * PER_STEP:.3g})")  # C = 6·N·D, N from the shapes
            mean = np.mean([float(law(n_of(r), b * PER_STEP, *TRUE["gelu"]))])
            assert float(cell.split(" ")[0]) == pytest.approx(mean, abs=0.02)
    assert "Approach 3" in text and "Approach 1" in text and "bootstrap over seeds" in text
    # the gap per cell: paired over the 3 seeds, near the truth's swiglu − gelu, resolved better
    gaps = parse_table(text, "### `swiglu` − `gelu` per cell")
    for r, row in zip((24, 48, 72, 96), gaps, strict=True):
        for b in (50, 100, 200, 400):
            d_true = float(
                law(n_of(r), b * PER_STEP, *TRUE["swiglu"]) - law(n_of(r), b * PER_STEP, *TRUE["gelu"])
            )
            mean, rest = row[f"{b} steps"].split(" [", 1)
            low, high = (float(v) for v in rest.split("]")[0].split(", "))
            assert float(mean) == pytest.approx(d_true, abs=0.01) and low < float(mean) < high
            assert rest.endswith(": better")


def test_one_seed_gets_the_residual_bootstrap_and_says_so(tmp_path: Path) -> None:
    make_sweep(tmp_path, widths=(24, 48, 72), steps=(50, 100, 200), seeds=1)
    grid = surface_data.read_grid(tmp_path)
    assert grid.boot is None
    text = "\n".join(surface.surface_lines(grid))
    assert surface_data.ONE_SEED in text
    assert "one seed: no interval (Approach 1" in text or "a not fitted" in text


def test_losses_falling_with_ln_n_unslowed_get_no_law_and_say_why(tmp_path: Path) -> None:
    make_sweep(tmp_path, widths=(24, 48, 72), steps=(50, 100, 200), seeds=2,
               clean=lambda n, d: 9.0 - 0.3 * math.log(n) + 40.0 * d**-0.33)  # fmt: skip
    _, arms = surface_data.analyse(surface_data.read_grid(tmp_path), [1e11])
    for arm in arms:
        assert arm.status.startswith(
            "not converged: α = 0.01 at the lower edge of its search (the loss falls"
        )
        assert arm.optima == [] and all(v is None for v in arm.params.values())
    # slowing, but towards a floor below zero loss: no law either (a cross-entropy is >= 0)
    make_sweep(tmp_path / "below", widths=(24, 48, 72), steps=(50, 100, 200), seeds=2,
               clean=lambda n, d: -2.0 + 60.0 * n**-0.1 + 40.0 * d**-0.33)  # fmt: skip
    _, arms = surface_data.analyse(surface_data.read_grid(tmp_path / "below"), [1e11])
    assert [a.status for a in arms] == [surface_data.E_NEGATIVE] * 2


DOCUMENTED = (
    "python -m gptlab.analysis.budgets.surface multirun/surface/surface_ffn_800 --flops 5e10,1.5e11,2.5e11"
)


def test_the_documented_command_and_the_report_print_the_surface(tmp_path: Path) -> None:
    """docs/ablations.md's command as written, on a hand-made sweep at its path."""
    sweep = tmp_path / "multirun" / "surface" / "surface_ffn_800"
    make_sweep(sweep, widths=(24, 48, 72), steps=(50, 100, 200), seeds=2)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    argv = [sys.executable, *shlex.split(DOCUMENTED)[1:]]
    proc = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "## Loss surface and compute-optimal size" in proc.stdout and "| 1.5e+11 |" in proc.stdout
    report = write_report(sweep, figures=False).read_text()
    assert "## Loss surface and compute-optimal size" in report and "### `swiglu`" in report
    assert "## Budgets" not in report and "## Ladder" not in report


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        (dict(widths=(24, 48)), "a surface needs at least 3 sizes (hydra.sweeper.ladder.widths)"),
        (dict(steps=(50, 100)), "a surface needs at least 3 budgets (hydra.sweeper.budgets)"),
        (
            dict(missing=tuple(range(24, 200))),
            "no complete LR (every seed with a result) for gelu at model.n_embd=24, 50 steps",
        ),
    ],
)
def test_bad_sweeps_are_one_line(tmp_path: Path, kwargs: dict, words: str, capsys) -> None:  # noqa: ANN001
    defaults = dict(widths=(24, 48, 72), steps=(50, 100, 200), seeds=2)
    make_sweep(tmp_path, **{**defaults, **kwargs})
    assert surface.main([str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and words in err[0], err
    assert surface.main([str(tmp_path), "--flops", "-1"]) == 2
    report = write_report(tmp_path, figures=False).read_text()
    assert "**No surface**:" in report


def test_a_sweep_without_both_axes_is_refused(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    assert surface.main([str(tmp_path)]) == 2
    assert "holds no sweep of sizes × budgets" in capsys.readouterr().err
