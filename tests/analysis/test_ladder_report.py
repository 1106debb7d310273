"""The ladder report on hand-made sweep directories (no training): each job's loss is drawn from a
known power law in N (N written out from the block's weight shapes here, not from the model code)
plus seed noise and an LR penalty, so the per-rung table, the fit, the extrapolated gap, the
crossover and the verdict each have a known answer; and bad ladders are refused in one line, exit 2,
after the per-rung table is written."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import yaml

from gptlab.ablation.grid import Ladder, build_grid, lr_values, seed_values
from gptlab.ablation.sweep_dir import write_record
from gptlab.analysis.ladder.records import LadderError
from gptlab.analysis.report import parse_table, write_report
from tests.conftest import run_script

WIDTHS = [24, 48, 72, 96]
ENV = {"OMP_NUM_THREADS": "1"}


def n_of(d: int) -> int:
    """Non-embedding parameters of a pre-norm RMSNorm block stack with L = d/24, no biases: per
    block 4d² attention + 8d² FFN (2·d·4d ungated, 3·d·(8/3)d gated) + two norm gains, and the
    final norm."""
    layers = d // 24
    return layers * (12 * d * d + 2 * d) + d


def _law(n: float, e: float, a: float, alpha: float) -> float:
    return e + a * n ** (-alpha)


def make_sweep(
    root: Path,
    laws: dict[str, tuple[float, float, float]],
    widths=WIDTHS,
    seeds: int = 3,
    rng_seed: int = 0,
    missing: tuple[int, ...] = (),
) -> dict:
    """A finished ladder sweep in `root` whose job losses follow `laws` (arm → (E, A, α), or a
    function of N)."""
    lrs, ladder = lr_values(1.5e-3, 8.2e-3, 3), Ladder(widths=list(widths), tokens=204_800)
    grid = build_grid("model/ffn", list(laws), "gelu", lrs, seed_values(seeds), {}, [], ladder=ladder,
                      tokens_per_step=1024)  # fmt: skip
    write_record(root, grid, "g")
    rng = np.random.default_rng(rng_seed)
    shared = {s: rng.normal(0, 0.003) for s in grid.seeds}  # a seed's data order: every rung and arm
    for k, job in enumerate(grid.jobs()):
        if k in missing:
            continue
        v = dict(o.split("=", 1) for o in job)
        d, arm, lr = int(v["model.n_embd"]), v["model/ffn"], float(v["optim.lr"])
        middle = float(grid.rung_lrs[v["model.n_embd"]][1])
        law = laws[arm]
        clean = law(n_of(d)) if callable(law) else _law(n_of(d), *law)
        loss = clean + shared[v["seed"]] + rng.normal(0, 0.002)
        loss += 0.05 * math.log(lr / middle) ** 2  # the rung's middle LR is its best
        path = root / str(k)
        (path / ".hydra").mkdir(parents=True)
        (path / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(job))
        layers, heads = int(v["model.n_layer"]), int(v["model.n_head"])
        model = {"n_embd": d, "n_layer": layers, "n_head": heads, "ffn": arm, "block_size": 64,
                 "vocab_size": None, "tie_embeddings": True, "pos_emb": "rope"}  # fmt: skip
        (path / ".hydra" / "config.yaml").write_text(yaml.safe_dump({"model": model}))
        metrics = {"status": "finished", "final_val_loss": loss, "vocab_size": 256, "tokens_seen": 204_800.0,
                   "steps": 200, "diverged": False, "num_params": n_of(d) + 256 * d}  # fmt: skip
        (path / "metrics.json").write_text(json.dumps(metrics))
    return grid.rung_lrs


def _rows(report: Path, heading: str) -> list[dict[str, str]]:
    return parse_table(report.read_text(), heading)


def _num(cell: str) -> tuple[float, float, float]:
    head, _, rest = cell.partition(" [")
    low, high = rest.split("]")[0].split(", ")
    return float(head), float(low), float(high)


def test_a_gap_that_closes_with_size_narrows_and_the_fit_recovers_alpha(tmp_path: Path) -> None:
    a = 1.0 * n_of(24) ** 0.3  # the base's excess loss is 1 nat at the smallest rung
    laws = {"gelu": (1.8, a, 0.3), "swiglu": (1.8, 0.8 * a, 0.3)}  # gap −0.2·A·N^−0.3 → 0
    make_sweep(tmp_path, laws)
    report = write_report(tmp_path, figures=False)
    rungs = _rows(report, "### Per rung")
    assert [r["rung"] for r in rungs] == [f"model.n_embd={d}" for d in WIDTHS]
    assert [int(r["N"].replace(",", "")) for r in rungs] == [n_of(d) for d in WIDTHS]
    assert all(
        r["`gelu` best LR"] == r["`swiglu` best LR"] and "edge" not in r["`gelu` best LR"] for r in rungs
    )
    for r, d in zip(rungs, WIDTHS, strict=True):  # the measured gap: mean over seeds of the pair's difference
        gap = _num(r["`swiglu` − `gelu`"])
        assert gap[0] == pytest.approx(-0.2 * a * n_of(d) ** -0.3, abs=0.006)
        assert gap[1] < gap[0] < gap[2]
    fits = {(r["arm"], r["against"]): r for r in _rows(report, "### Fitted curves")}
    for arm in ("`gelu`", "`swiglu`"):
        alpha = _num(fits[(arm, "N")]["α [95% CI]"])  # (coverage itself: tests/analysis/test_powerlaw.py)
        assert abs(alpha[0] - 0.3) < 0.02 and alpha[1] < alpha[0] < alpha[2]
        assert fits[(arm, "N")]["fit"].startswith("converged")
        assert fits[(arm, "C")]["fit"].startswith("converged")
    (trend,) = _rows(report, "### The gap over the rungs")
    assert trend["over the rungs"] == "narrows over the rungs", trend
    (ext,) = _rows(report, "### The gap extrapolated")
    assert ext["verdict"] == "narrows", ext
    assert ext["crossover N"] == "none in range"
    truth = -0.2 * a * (10 * n_of(96)) ** -0.3
    g = _num(ext["gap at 10× N"].split(" at N=")[0])
    assert g[1] <= truth <= g[2]


@pytest.mark.slow  # ~7 s: the figure (matplotlib)
def test_a_gap_that_changes_sign_beyond_the_ladder_flips_with_its_crossover(tmp_path: Path) -> None:
    n_max = n_of(96)
    a_base = 1.0 * n_of(24) ** 0.5
    # gap(N) = 0.05 − 0.08·(N/N_max)^−0.5: −0.03 at the largest rung, +0.025 at 10×, 0 at 2.56·N_max
    laws = {"gelu": (1.8, a_base, 0.5), "swiglu": (1.85, a_base - 0.08 * n_max**0.5, 0.5)}
    make_sweep(tmp_path, laws, rng_seed=1)
    report = write_report(tmp_path, figures=False)
    (ext,) = _rows(report, "### The gap extrapolated")
    assert ext["verdict"] == "flips", ext
    cross = _num(ext["crossover N"])
    assert cross[1] <= 2.56 * n_max <= cross[2] and cross[0] == pytest.approx(2.56 * n_max, rel=0.3)
    # the figure alone (write_report's other figures are tested with the plain report)
    from gptlab.ablation.sweep_dir import read_record
    from gptlab.analysis.ladder.analyse import analyse
    from gptlab.analysis.ladder.report import ladder_figure
    from gptlab.analysis.sweep.arms import arrange
    from gptlab.analysis.sweep.jobs import read_sweep

    record = read_record(tmp_path)
    path = ladder_figure(
        analyse(arrange(read_sweep(tmp_path), record), record), "ladder", tmp_path / "figures"
    )
    assert path is not None and path.stat().st_size > 10_000


def test_losses_falling_with_ln_n_unslowed_get_the_log_linear_limit_and_its_extrapolation(
    tmp_path: Path,
) -> None:
    """No E can be fitted when the loss falls with ln N without slowing (here it even speeds up a
    little, as ladder_ffn's did: a power law can only slow down, so α runs to 0): the report says so,
    fits the limit L = c − b·ln N, and extrapolates the gap with it."""

    def bend(n: float) -> float:  # the same for both arms: it cancels in the gap
        return -0.002 * (math.log(n) - 11) ** 2

    laws = {"gelu": lambda n: 2.7 - 0.04 * math.log(n) + bend(n),
            "swiglu": lambda n: 2.84 - 0.06 * math.log(n) + bend(n)}  # fmt: skip
    make_sweep(tmp_path, laws, rng_seed=2)
    report = write_report(tmp_path, figures=False)
    fits = {(r["arm"], r["against"]): r for r in _rows(report, "### Fitted curves")}
    for arm, b in (("`gelu`", 0.04), ("`swiglu`", 0.06)):
        row = fits[(arm, "N")]
        assert row["fit"].startswith("α → 0") and row["E [95% CI]"] == "—"
        slope = _num(row["b in L = c − b·ln N [95% CI]"])
        assert slope[1] < slope[0] < slope[2] and slope[0] == pytest.approx(b, abs=0.01)
    (ext,) = _rows(report, "### The gap extrapolated")
    n_max = n_of(96)
    gap = lambda n: laws["swiglu"](n) - laws["gelu"](n)  # noqa: E731
    g = _num(ext["gap at 10× N"].split(" at N=")[0])
    assert g[1] <= gap(10 * n_max) <= g[2]
    assert ext["verdict"].startswith("widens (on the log-linear limit for swiglu, gelu"), ext
    # without a curve: the measured gap's slope on log10 N is −0.02·ln 10 per 10× N (the bend cancels)
    (trend,) = _rows(report, "### The gap over the rungs")
    per = _num(trend["gap's change per 10× N over the rungs [95% CI]"])
    assert per[1] <= -0.02 * math.log(10) <= per[2] and per[0] == pytest.approx(
        -0.02 * math.log(10), abs=0.01
    )
    assert trend["over the rungs"] == "widens over the rungs", trend
    # the lines cross where 0.14 = 0.02·ln N, N = e^7 ≈ 1,097: below the smallest rung, out of range
    assert ext["crossover N"] == "none in range"


def test_the_figure_promises_a_dashed_extrapolation_only_when_a_curve_is_drawn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Losses that rise with N (the depth ladder's post-norm arm did) fit no falling curve: the figure
    shows the points, and its title says so instead of naming a dashed line that is not there."""
    import matplotlib.axes

    from gptlab.ablation.sweep_dir import read_record
    from gptlab.analysis.ladder.analyse import analyse
    from gptlab.analysis.ladder.report import ladder_figure
    from gptlab.analysis.sweep.arms import arrange
    from gptlab.analysis.sweep.jobs import read_sweep

    titles: list[str] = []
    set_title = matplotlib.axes.Axes.set_title
    monkeypatch.setattr(
        matplotlib.axes.Axes,
        "set_title",
        lambda ax, t, *a, **k: (titles.append(t), set_title(ax, t, *a, **k)),
    )

    def figure_title(laws: dict, root: Path) -> str:
        make_sweep(root, laws, rng_seed=3)
        record = read_record(root)
        ladder_figure(analyse(arrange(read_sweep(root), record), record), "ladder", root / "figures")
        return titles[-1]

    rising = {"gelu": lambda n: 1.5 + 0.05 * math.log(n), "swiglu": lambda n: 1.6 + 0.06 * math.log(n)}
    assert "dashed" not in figure_title(rising, tmp_path / "rising")
    a = 1.0 * n_of(24) ** 0.3
    falling = {"gelu": (1.8, a, 0.3), "swiglu": (1.8, 0.8 * a, 0.3)}
    assert "dashed: extrapolated to 10× N" in figure_title(falling, tmp_path / "falling")


def test_a_missing_job_makes_the_verdict_incomplete(tmp_path: Path) -> None:
    a = 1.0 * n_of(24) ** 0.3
    make_sweep(tmp_path, {"gelu": (1.8, a, 0.3), "swiglu": (1.8, 0.8 * a, 0.3)}, missing=(40,))
    report = write_report(tmp_path, figures=False)
    (ext,) = _rows(report, "### The gap extrapolated")
    assert ext["verdict"].startswith("incomplete (model.n_embd=72: "), ext  # job 40: seed 2, d=72


def test_a_ladder_of_two_sizes_prints_its_rungs_and_refuses_the_fit(tmp_path: Path) -> None:
    a = 1.0 * n_of(24) ** 0.3
    make_sweep(tmp_path, {"gelu": (1.8, a, 0.3), "swiglu": (1.8, 0.8 * a, 0.3)}, widths=[24, 48])
    with pytest.raises(LadderError, match="needs at least 3"):
        write_report(tmp_path, figures=False)
    rungs = _rows(tmp_path / "report.md", "### Per rung")
    assert len(rungs) == 2 and rungs[0]["`swiglu` − `gelu`"] != "—"
    assert "### Fitted curves" not in (tmp_path / "report.md").read_text()


@pytest.mark.slow
def test_bad_ladders_are_one_line_exit_2(tmp_path: Path) -> None:
    """scripts/report.py: 2 sizes, and sizes not increasing in N (a record edited by hand)."""
    a = 1.0 * n_of(24) ** 0.3
    laws = {"gelu": (1.8, a, 0.3), "swiglu": (1.8, 0.8 * a, 0.3)}
    two = tmp_path / "two"
    make_sweep(two, laws, widths=[24, 48])
    unordered = tmp_path / "unordered"
    make_sweep(unordered, laws)
    record = json.loads((unordered / "ablation.json").read_text())
    record["cells"]["model.n_embd"] = ["24", "72", "48", "96"]
    (unordered / "ablation.json").write_text(json.dumps(record))
    for root, message in ((two, "needs at least 3"), (unordered, "must increase in N")):
        proc = run_script("scripts/report.py", str(root), "figures=false", env=ENV)
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], proc.stderr
        assert "### Per rung" in (root / "report.md").read_text()


@pytest.mark.parametrize(
    "shape",
    [dict(tie_embeddings=True, pos_emb="rope"), dict(tie_embeddings=False, pos_emb="rope"),
     dict(tie_embeddings=False, pos_emb="learned", ffn="swiglu")],
)  # fmt: skip
def test_model_size_is_the_models_own_count(tmp_path: Path, shape: dict) -> None:
    """N and FLOPs per token from metrics.json's total against the model built on the meta device:
    N = num_params(exclude_embedding=True) less the head's V·d (tied: the table itself; untied: the
    head), i.e. the blocks and the final norm alone."""
    import torch

    from gptlab.analysis.ladder.analyse import model_size
    from gptlab.analysis.sweep.jobs import Job
    from gptlab.model import GPT, GPTConfig

    values = {"n_embd": 48, "n_layer": 2, "n_head": 2, "block_size": 32, "vocab_size": 256, **shape}
    with torch.device("meta"):
        model = GPT(GPTConfig.from_dict(values))
    (tmp_path / ".hydra").mkdir()
    (tmp_path / ".hydra" / "config.yaml").write_text(
        yaml.safe_dump({"model": {**values, "vocab_size": None}})
    )
    job = Job("0", tmp_path, [], metrics={"num_params": model.num_params(), "vocab_size": 256})
    assert model_size(job) == (model.num_params(exclude_embedding=True) - 256 * 48, model.flops_per_token())
    blocks = sum(p.numel() for n, p in model.named_parameters() if n.startswith(("blocks.", "final_norm.")))
    assert model_size(job)[0] == blocks
