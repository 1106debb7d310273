"""optim.schedule=wsd against its formula, written out here, at every step: in torch's LambdaLR on a
real optimizer for each decay shape, and in the LR a short real run logged (the one its optimizer used).
The other schedules' factors moved to training/schedules.py with it: checked here at a few points too."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from gptlab.compose import compose_config
from gptlab.config import OptimConfig
from gptlab.errors import one_line
from gptlab.training.optim import lr_factor
from tests.training.rel_harness import series, train_here

LR, FLOOR = 2e-3, 2e-4


def expected(step: int, warmup: int, total: int, decay: int, shape: str, lr: float, min_lr: float) -> float:
    """Warmup (step+1)/warmup, lr held, then at the decay's k-th step (k = 1..decay) progress k/decay:
    linear 1-p, sqrt 1-sqrt(p) (Hägele et al. 2024), cosine (1+cos πp)/2, from lr down to min_lr."""
    if step < warmup:
        return lr * (step + 1) / warmup
    k = step - (total - decay) + 1
    if k <= 0 or decay == 0:
        return lr
    p = min(1.0, k / decay)
    s = {"linear": 1 - p, "sqrt": 1 - p**0.5, "cosine": (1 + math.cos(math.pi * p)) / 2}[shape]
    return min_lr + (lr - min_lr) * s


def lambdalr_lrs(ocfg: OptimConfig, total: int) -> list[float]:
    """The LR torch's LambdaLR gives an AdamW's group at each of `total` steps."""
    opt = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(2))], lr=ocfg.lr)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_factor(ocfg, total))
    lrs = []
    for _ in range(total):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return lrs


@pytest.mark.parametrize("shape", ["linear", "sqrt", "cosine"])
@pytest.mark.parametrize("min_lr", [0.0, FLOOR])
def test_each_shape_follows_the_formula_at_every_step(shape: str, min_lr: float) -> None:
    ocfg = OptimConfig(lr=LR, min_lr=min_lr, warmup_steps=3, schedule="wsd", decay_steps=6, decay_shape=shape)
    got = lambdalr_lrs(ocfg, 20)
    want = [expected(s, 3, 20, 6, shape, LR, min_lr) for s in range(20)]
    assert got == pytest.approx(want, rel=1e-12, abs=1e-15)
    assert got[13] == LR and got[14] < LR and got[19] == pytest.approx(min_lr, abs=1e-15)


def test_decay_fraction_is_the_run_s_share_rounded_and_decay_zero_holds() -> None:
    frac = OptimConfig(lr=LR, min_lr=0.0, warmup_steps=2, schedule="wsd", decay_fraction=0.25)
    assert lambdalr_lrs(frac, 18) == pytest.approx(
        [expected(s, 2, 18, 4, "sqrt", LR, 0.0) for s in range(18)]
    )
    trunk = OptimConfig(lr=LR, warmup_steps=2, schedule="wsd", decay_steps=0)
    assert lambdalr_lrs(trunk, 10)[2:] == [LR] * 8
    assert lr_factor(trunk, 10)(10) == 1.0  # a scheduler step past the end stays held


def test_other_schedules_keep_their_factors() -> None:
    # a quarter into the decay (step 9 of 24 after a 4-step warmup): cosine (1 + cos π/4)/2, linear 3/4
    for schedule, mid in (
        ("cosine", 0.5 * (1 + math.cos(math.pi * 0.25))),
        ("linear", 0.75),
        ("constant", 1.0),
    ):
        f = lr_factor(OptimConfig(lr=LR, min_lr=FLOOR, warmup_steps=4, schedule=schedule), 24)
        floor = FLOOR / LR
        assert f(0) == 0.25 and f(3) == 1.0
        assert f(9) == pytest.approx(mid if schedule == "constant" else floor + (1 - floor) * mid)


def test_a_run_logs_the_lr_of_the_formula_at_every_step(tmp_path: Path, cache: Path) -> None:
    """The `lr` a real run logged (the one its optimizer stepped with: module.training_step)."""
    train_here(
        tmp_path, cache, "trainer.max_steps=9", "trainer.val_check_interval=9", "optim.schedule=wsd",
        "optim.warmup_steps=2", "optim.decay_steps=4", "optim.decay_shape=sqrt", "optim.min_lr=0",
    )  # fmt: skip
    lr = series(tmp_path, "lr")
    assert sorted(lr) == list(range(9))
    want = [expected(s, 2, 9, 4, "sqrt", LR, 0.0) for s in range(9)]
    assert [lr[s] for s in range(9)] == pytest.approx(want, rel=1e-6, abs=1e-12)  # logged as float32


# (overrides, the whole one-line error)
BAD = [
    (["optim.schedule=wsd"], "error: optim.schedule=wsd needs exactly one of optim.decay_steps and "
     "optim.decay_fraction, neither was given (decay_steps=0: a trunk that never decays)"),
    (["optim.schedule=wsd", "optim.decay_steps=5", "optim.decay_fraction=0.2"], "error: optim.schedule=wsd "
     "needs exactly one of optim.decay_steps and optim.decay_fraction, both were given (decay_steps=0: a "
     "trunk that never decays)"),
    (["optim.decay_steps=5"], "error: optim.decay_steps is read only by optim.schedule=wsd, not cosine; "
     "add optim.schedule=wsd or drop it"),
    (["optim.schedule=wsd", "optim.decay_steps=-1"], "error: optim.decay_steps=-1 is not accepted; give "
     "an integer >= 0 (0: no decay, a trunk)"),
    (["optim.schedule=wsd", "optim.decay_fraction=1.5"], "error: optim.decay_fraction=1.5 is not accepted; "
     "give a number in (0, 1]"),
    (["optim.schedule=wsd", "optim.decay_steps=5", "optim.decay_shape=exp"], "error: optim.decay_shape='exp' "
     "is not accepted; choose one of linear, sqrt, cosine"),
    (["optim.schedule=wsd", "optim.decay_steps=490"], "error: optim.decay_steps=490 does not fit the run: "
     "with optim.warmup_steps=20 it needs trainer.max_steps >= 510, not 500"),
    (["optim.schedule=wsd", "optim.decay_steps=5", "optim.branch_points=[100]"], "error: "
     "optim.branch_points needs a trunk, optim.decay_steps=0 (not a decay of 5 steps): a branch decays "
     "from a point where the LR was still held"),
    (["optim.schedule=wsd", "optim.decay_steps=0", "optim.branch_points=[600]"], "error: "
     "optim.branch_points has step 600, past trainer.max_steps=500; give steps in [1, 500]"),
    (["optim.schedule=wsd", "optim.decay_steps=0", "optim.branch_points=[2X]"], "error: optim.branch_points "
     "has '2X', which is not accepted; give steps (integers >= 1) or token counts with a K, M, G or T "
     "suffix (e.g. '2M')"),
]  # fmt: skip


@pytest.mark.parametrize("overrides, line", BAD, ids=[" ".join(o) for o, _ in BAD])
def test_bad_wsd_settings_fail_in_one_line(overrides: list[str], line: str) -> None:
    with pytest.raises(ValueError) as err:
        compose_config(overrides)
    assert one_line(err.value.__cause__ or err.value) == line


def test_token_branch_points_become_the_first_step_reaching_them() -> None:
    from gptlab.training.branches import resolve_points

    cfg = compose_config(
        ["optim.schedule=wsd", "optim.decay_steps=0", "data.batch_size=4", "model.block_size=32",
         "trainer.max_steps=20", "optim.branch_points=[3,'1K','0.256K']"]
    )  # fmt: skip
    # 4 × 32 = 128 tokens a step: 1000 tokens at step 8 (1024), 256 at step 2; one rank, then two
    assert resolve_points(cfg, 1) == [
        {"step": 2, "tokens": 256},
        {"step": 3, "tokens": 384},
        {"step": 8, "tokens": 1024},
    ]
    assert [p["step"] for p in resolve_points(cfg, 2)] == [1, 3, 4]


def test_sweep_status_knows_a_branch_s_length(tmp_path: Path) -> None:
    """A branch's trainer.max_steps is set as it starts (at + d): status reads its composed config so."""
    from omegaconf import OmegaConf

    from gptlab.analysis.sweep.jobs import Job
    from gptlab.analysis.sweep.status import max_steps
    from gptlab.compose import compose_raw

    for name, overrides, length in (
        ("branch", ["branch_from=/trunk", "branch.at=40", "optim.decay_steps=8"], 48),
        ("trunk", ["optim.schedule=wsd", "optim.decay_steps=0", "trainer.max_steps=64"], 64),
    ):
        (tmp_path / name / ".hydra").mkdir(parents=True)
        (tmp_path / name / ".hydra" / "config.yaml").write_text(OmegaConf.to_yaml(compose_raw(overrides)[0]))
        assert max_steps(Job(name, tmp_path / name, overrides)) == length
