"""A ladder grid: model sizes as cells, each rung's depth, heads, token budget and LR grid from the
documented rules (oracle: the rules' formulas written out here), job numbering fixed, bad ladders
refused in one line naming the field."""

from __future__ import annotations

import dataclasses
import itertools
import math

import pytest
import torch
from omegaconf import OmegaConf

from gptlab.ablation.grid import GridError, Ladder, build_grid, lr_values, seed_values
from gptlab.compose import compose_with_hydra
from gptlab.model import GPT, GPTConfig

ARMS = ["gelu", "swiglu"]


def _grid(ladder: Ladder, seeds: int = 2, cli=(), tokens_per_step: int = 1024, lrs=None):
    return build_grid(
        "model/ffn", ARMS, "gelu", lrs or lr_values(1.5e-3, 8.2e-3, 3), seed_values(seeds), {}, list(cli),
        ladder=ladder, tokens_per_step=tokens_per_step,
    )  # fmt: skip


def test_rungs_follow_the_rules_and_numbering_is_seed_rung_arm_lr() -> None:
    ladder = Ladder(widths=[24, 48, 96], aspect=24, head_dim=12, lr_ref_width=96, lr_width_exponent=0.5,
                    tokens=204_800)  # fmt: skip
    grid = _grid(ladder)
    jobs = grid.jobs()
    assert len(jobs) == 2 * 3 * 2 * 3  # seeds × rungs × arms × LRs
    base = [1.5e-3, 1.5e-3 * (8.2 / 1.5) ** 0.5, 8.2e-3]
    k = 0
    for seed, d, arm in itertools.product(["1", "2"], [24, 48, 96], ARMS):
        for i in range(3):
            lr = float(f"{float(f'{base[i]:.3g}') * (96 / d) ** 0.5:.3g}")
            expect = [f"seed={seed}", f"model.n_embd={d}", f"model/ffn={arm}"]
            assert jobs[k][:3] == expect, k
            assert float(jobs[k][3].split("=")[1]) == pytest.approx(lr, rel=1e-12)
            assert jobs[k][4:] == [
                f"model.n_layer={d // 24}",
                f"model.n_head={d // 12}",
                "trainer.max_steps=200",
            ]
            k += 1
    # more seeds append: the old jobs keep their numbers (a sweep dir can grow)
    assert _grid(ladder, seeds=3).jobs()[: len(jobs)] == jobs


def test_tokens_per_param_sets_each_rungs_steps() -> None:
    grid = _grid(Ladder(widths=[48, 96], tokens_per_param=2.0), tokens_per_step=16 * 64)
    steps = {o.split("=")[1] for j in grid.jobs() for o in j if o.startswith("trainer.max_steps=")}
    # N = 12·L·d² with L = d/24: 12·2·48² = 55,296 and 12·4·96² = 442,368; tokens = 2·N
    assert steps == {str(math.ceil(2 * 55_296 / 1024)), str(math.ceil(2 * 442_368 / 1024))}


def test_plain_grid_is_unchanged() -> None:
    """No ladder: the job list is the product seed × cells × arm × LR as before."""
    lrs = lr_values(1e-3, 1e-2, 2)
    grid = build_grid("model/ffn", ARMS, None, lrs, ["1", "2"], {"model.n_layer": ["1", "2"]},
                      [("trainer.max_steps", ["5"], False)])  # fmt: skip
    dims = [("seed", ["1", "2"]), ("model.n_layer", ["1", "2"]), ("model/ffn", ARMS), ("optim.lr", lrs)]
    expect = [[f"{k}={v}" for (k, _), v in zip(dims, c, strict=True)] + ["trainer.max_steps=5"]
              for c in itertools.product(*(v for _, v in dims))]  # fmt: skip
    assert grid.jobs() == expect and grid.ladder_key is None


def test_a_ladder_crossed_with_budgets_leaves_each_jobs_steps_to_the_budgets() -> None:
    """Sizes × budgets (issue 45 item 4): a rung sets depth and heads, no trainer.max_steps; the
    budgets make a trunk per (seed, rung, arm, LR) and a branch per budget, each with its rung's
    shape and LR (the rule written out here); a token budget on the ladder is refused."""
    from dataclasses import replace

    from gptlab.ablation.budgets import budget_plan

    grid = build_grid("model/ffn", ARMS, "gelu", lr_values(1.5e-3, 8.2e-3, 2), ["1"], {}, [],
                      ladder=Ladder(widths=[24, 48]), budgets=True)  # fmt: skip
    plan = budget_plan([10, 20], 0.2, warmup=2)
    jobs = replace(grid, budgets=[list(p) for p in plan], sweep_dir="/s").jobs()
    trunks = [j for j in jobs if not any(o.startswith("branch_from=") for o in j)]
    assert len(trunks) == 2 * 2 * 2 and len(jobs) == len(trunks) * 3  # rungs × arms × LRs; 2 branches each
    for k, trunk in enumerate(trunks):
        v = dict(o.split("=", 1) for o in trunk)
        d = int(v["model.n_embd"])
        assert (v["model.n_layer"], v["model.n_head"]) == (str(d // 24), str(d // 24))
        assert v["trainer.max_steps"] == "16" and v["optim.branch_points"] == "[8,16]"
        assert sum(o.startswith("trainer.max_steps=") for o in trunk) == 1  # the rung sets none
        branches = [j for j in jobs if f"branch_from=/s/{k}" in j]
        assert [dict(o.split("=", 1) for o in b)["trainer.max_steps"] for b in branches] == ["10", "20"]
        for b in branches:
            bv = dict(o.split("=", 1) for o in b)
            assert {key: bv[key] for key in ("model.n_embd", "model.n_layer", "optim.lr")} == {
                key: v[key] for key in ("model.n_embd", "model.n_layer", "optim.lr")
            }
    with pytest.raises(GridError, match="takes its tokens from the budgets; set tokens and tokens_per_param"):
        ladder = Ladder(widths=[24, 48], tokens=10)
        build_grid("model/ffn", ARMS, "gelu", ["0.001"], ["1"], {}, [], ladder=ladder, budgets=True)


def test_widths_on_the_command_line_replace_the_rungs() -> None:
    grid = _grid(Ladder(widths=[24, 48, 72], tokens=1024), cli=[("model.n_embd", ["48", "96"], True)])
    assert grid.cells == {"model.n_embd": ["48", "96"]}


@pytest.mark.parametrize(
    ("ladder", "cli", "message"),
    [
        (Ladder(widths=[48, 24], tokens=10), (), "must increase in N"),
        (Ladder(widths=[48, 48], tokens=10), (), "must increase in N"),
        (Ladder(widths=[24, 50], tokens=10), (), "50 is not a multiple of hydra.sweeper.ladder.aspect"),
        (Ladder(widths=[24, 48], tokens=10, tokens_per_param=1.0), (), "set exactly one of tokens"),
        (Ladder(widths=[24, 48]), (), "set exactly one of tokens"),
        (Ladder(widths=[24, 48], tokens_per_param=-1.0), (), "tokens_per_param=-1.0"),
        (Ladder(widths=[], tokens=10), (), "widths is empty"),
        (Ladder(widths=[24, 48], tokens=10), [("optim.lr", ["0.001"], False)], "optim.lr is not accepted"),
        (
            Ladder(widths=[24, 48], tokens=10),
            [("model.n_layer", ["2"], False)],
            "model.n_layer is not accepted",
        ),
        (Ladder(widths=[24, 48], tokens=10), [("model.n_embd", ["x"], False)], "must be an integer"),
    ],
)
def test_bad_ladder_is_one_line_naming_the_field(ladder: Ladder, cli, message: str) -> None:
    with pytest.raises(GridError, match=message) as err:
        _grid(ladder, cli=cli)
    assert "\n" not in str(err.value)


def _ffn_params(cfg: GPTConfig) -> int:
    with torch.device("meta"):
        model = GPT(cfg)
    return sum(p.numel() for n, p in model.named_parameters() if ".ffn." in n)


@pytest.mark.parametrize("name", ["ladder_ffn", "ladder_ffn_quick"])
def test_ladder_presets_compare_at_equal_parameters_at_every_rung(name: str) -> None:
    cfg = compose_with_hydra([f"experiment={name}"])
    s = cfg.hydra.sweeper
    widths = list(s.ladder.widths)
    if name == "ladder_ffn":
        assert len(widths) >= 4 and s.seeds >= 3 and s.lr.points >= 3 and set(s.arms) == {"gelu", "swiglu"}
    else:
        assert (len(widths), len(s.arms), s.lr.points, s.seeds) == (3, 2, 2, 2)
    base = GPTConfig(**{**OmegaConf.to_container(cfg.model, resolve=True), "vocab_size": 256})
    sizes = []
    for d in widths:
        rung = dataclasses.replace(
            base, n_embd=d, n_layer=d // s.ladder.aspect, n_head=d // s.ladder.head_dim
        )
        counts = {f: _ffn_params(dataclasses.replace(rung, ffn=f)) for f in s.arms}
        assert len(set(counts.values())) == 1, (d, counts)  # 8/3·d gated = 4·d ungated exactly
        sizes.append(next(iter(counts.values())))
    assert sizes == sorted(sizes) and len(set(sizes)) == len(sizes)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("hydra.sweeper.ladder.widths=[48,24]", "rung sizes must increase in N = 12·n_layer·n_embd²"),
        ("hydra.sweeper.ladder.widths=[24,50]", "50 is not a multiple of hydra.sweeper.ladder.aspect=24"),
        ("hydra.sweeper.ladder.tokens_per_param=20", "set exactly one of tokens"),
        ("optim.lr=0.001,0.003", "optim.lr is not accepted on the command line of a ladder"),
        ("model.n_layer=2", "model.n_layer is not accepted on the command line of a ladder"),
    ],
)
def test_bad_ladder_sweep_is_one_line_exit_2_nothing_written(
    tmp_path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str], override: str, message: str
) -> None:
    """docs/bad-inputs.md, Ladders: the real command line, before any job or sweep dir exists. The
    first case as a real process (its exit code and line), the others through the same `hydra.main`
    in this process (tests/cli_here.py)."""
    from tests.cli_here import train_py_here
    from tests.conftest import run_script

    out = tmp_path / "bad"
    args = ["-m", "experiment=ladder_ffn_quick", override, f"hydra.sweep.dir={out}"]
    if override == "hydra.sweeper.ladder.widths=[48,24]":
        proc = run_script("train.py", *args, env={"OMP_NUM_THREADS": "1"})
        code, stderr = proc.returncode, proc.stderr
    else:
        code, stderr = train_py_here(monkeypatch, capfd, *args)
    lines = stderr.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), stderr
    assert message in lines[0] and not out.exists()


def test_a_depth_ladder_keeps_the_width_and_varies_depth() -> None:
    ladder = Ladder(
        depths=[2, 4, 8], width=32, head_dim=16, lr_ref_width=96, lr_width_exponent=1.0, tokens=2048
    )
    arms, lrs_in = ["pre", "post"], lr_values(1e-3, 4e-3, 2)
    grid = build_grid("model/placement", arms, "pre", lrs_in, seed_values(1), {}, [], ladder=ladder,
                      tokens_per_step=1024)  # fmt: skip
    assert grid.ladder_key == "model.n_layer" and grid.cells == {"model.n_layer": ["2", "4", "8"]}
    jobs = grid.jobs()
    assert len(jobs) == 3 * 2 * 2
    lrs = [f"{1e-3 * 3:.3g}", f"{4e-3 * 3:.3g}"]  # the width rule at d = 32: × 96/32, the same every rung
    assert all(grid.rung_lrs[v] == lrs for v in ("2", "4", "8"))
    first = ["seed=1", "model.n_layer=2", "model/placement=pre", f"optim.lr={lrs[0]}", "model.n_head=2"]
    assert jobs[0] == [*first, "trainer.max_steps=2"]
    assert _grid(
        Ladder(depths=[1, 2], width=48, head_dim=24, tokens=10), cli=[("model.n_layer", ["3", "6"], True)]
    ).cells == {"model.n_layer": ["3", "6"]}


@pytest.mark.parametrize(
    ("ladder", "message"),
    [
        (
            Ladder(depths=[4, 2], width=32, head_dim=16, tokens=10),
            r"depths=\[4, 2\]: rung sizes must increase in N",
        ),
        (Ladder(depths=[2, 4], width=30, head_dim=16, tokens=10), "model.n_embd: 30 is not a multiple"),
        (Ladder(widths=[24], depths=[2], width=24, tokens=10), "set widths .* or depths .*, not both"),
    ],
)
def test_bad_depth_ladder_is_one_line(ladder: Ladder, message: str) -> None:
    with pytest.raises(GridError, match=message):
        _grid(ladder)


def test_ladder_placement_preset_is_a_depth_ladder_at_fixed_width() -> None:
    cfg = compose_with_hydra(["experiment=ladder_placement"])
    s = cfg.hydra.sweeper
    assert len(s.ladder.depths) >= 4 and not s.ladder.widths and s.seeds >= 3 and s.lr.points >= 3
    assert set(s.arms) == {"pre", "post"} and s.baseline == "pre"
    assert list(s.ladder.depths) == sorted(set(s.ladder.depths)) and cfg.model.n_embd % s.ladder.head_dim == 0
