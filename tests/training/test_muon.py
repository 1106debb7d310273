"""optim.name=muon: torch.optim.Muon on the hidden matrices, AdamW on the rest, one torch optimizer.

The oracle is Muon and AdamW written here in plain torch from torch's documented algorithm: momentum
with Nesterov's look-ahead, Jordan's quintic Newton–Schulz (a, b, c) = (3.4445, −4.775, 2.0315), 5
iterations on the Frobenius-normalised matrix (wide side first), in bfloat16; decoupled decay
W ← W(1 − lr·wd); the step lr·k·O with k = 0.2·sqrt(max(A, B)) (match_rms_adamw) or sqrt(max(1, A/B))
(original). It is fed our model's gradients and weights at every step (teacher forcing), so each of
6 steps, through the warmup, is compared on its own, to float32 rounding (1e-5 of each update).

One detail follows torch's code rather than its docstring: the buffer is the average
lerp(B, g, 1 − μ) = (1 − μ)·(the docstring's B), and Nesterov's input lerp(g, B, μ). Both point the
same way, and Newton–Schulz keeps only the direction, but written as μB + (1 − μ)g the float32
rounding differs by one ulp here and there, the bf16 cast flips, and the iteration (slope a ≈ 3.4 at
0, applied 5 times) amplifies those flips in the gradient's small singular directions: the updates
then differ by 1-2% (measured on this model). A wrong LR factor is 37% off here or more.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from gptlab.config import OptimConfig
from gptlab.errors import USER_ERRORS, one_line
from gptlab.model import GPT, GPTConfig
from gptlab.training.optim import build_optimizer, lr_factor
from tests.training.rel_harness import REPO, series, train_here

NS = (3.4445, -4.775, 2.0315)
VOCAB, T = 64, 16
SWIGLU = dict(n_layer=2, n_embd=64, n_head=4, block_size=T, vocab_size=VOCAB)
GELU = dict(SWIGLU, ffn="gelu", norm="layernorm", bias=True, tie_embeddings=False, pos_emb="learned")


def hidden_names(cfg: GPTConfig) -> set[str]:
    """The matrices Muon must hold, spelled out: q, k, v, out and the FFN's gate (gated), up, down."""
    ffn = ["gate", "up", "down"] if cfg.ffn == "swiglu" else ["up", "down"]
    return {
        *(f"blocks.{i}.attn.{m}_proj.weight" for i in range(cfg.n_layer) for m in ("q", "k", "v", "out")),
        *(f"blocks.{i}.ffn.{m}_proj.weight" for i in range(cfg.n_layer) for m in ffn),
    }


@pytest.mark.parametrize("kw", [SWIGLU, GELU], ids=["swiglu-tied", "gelu-bias-untied-learned"])
def test_muon_holds_the_hidden_matrices_and_adamw_every_other_parameter(kw: dict) -> None:
    cfg = GPTConfig(**kw)
    model = GPT(cfg)
    opt = build_optimizer(model, OptimConfig(name="muon"), "cpu")
    name_of = {id(p): n for n, p in model.named_parameters()}
    muon = [name_of[id(p)] for g in opt.muon.param_groups for p in g["params"]]
    adamw = [name_of[id(p)] for g in opt.adamw.param_groups for p in g["params"]]
    assert sorted(muon) == sorted(hidden_names(cfg))
    assert sorted(adamw) == sorted(set(name_of.values()) - hidden_names(cfg))
    assert len(muon) + len(adamw) == len(name_of)  # each parameter once
    # the scheduler and Lightning see one optimizer holding both halves' groups
    assert [id(g) for g in opt.param_groups] == [
        id(g) for g in opt.adamw.param_groups + opt.muon.param_groups
    ]
    decay = {name_of[id(p)]: g["weight_decay"] for g in opt.param_groups for p in g["params"]}
    assert {n for n, wd in decay.items() if wd > 0} == {
        n for n, p in model.named_parameters() if p.dim() == 2
    }


# ---- the plain-torch oracle -------------------------------------------------------------------------
def newton_schulz(g: torch.Tensor, steps: int = 5) -> torch.Tensor:
    """The quintic iteration X ← aX + (bA + cA²)X, A = XXᵀ, on the Frobenius-normalised matrix (its
    spectral norm then ≤ 1), wide side first, in bfloat16 (fused multiply-adds as addmm)."""
    a, b, c = NS
    x = g.to(torch.bfloat16)
    tall = x.size(0) > x.size(1)
    x = x.T if tall else x
    x = x / x.norm().clamp(min=1e-7)
    for _ in range(steps):
        gram = x @ x.T
        x = torch.addmm(x, torch.addmm(gram, gram, gram, beta=b, alpha=c), x, beta=a)
    return (x.T if tall else x).float()


class Oracle:
    """Muon on the names of hidden_names, AdamW (decay on 2-D tensors) on the rest."""

    def __init__(self, cfg: OptimConfig, hidden: set[str]) -> None:
        self.cfg, self.hidden, self.t = cfg, hidden, 0
        self.buf: dict[str, torch.Tensor] = {}
        self.m: dict[str, torch.Tensor] = {}
        self.v: dict[str, torch.Tensor] = {}

    def step(
        self, w: dict[str, torch.Tensor], g: dict[str, torch.Tensor], lr: float
    ) -> dict[str, torch.Tensor]:
        c, self.t = self.cfg, self.t + 1
        out = {}
        for n in w:
            if n in self.hidden:
                mu = c.muon_momentum
                # torch keeps (1 − μ)·B, an average, not the docstring's sum: the same direction,
                # which is all Newton–Schulz keeps. Written as lerp, as torch computes it (module doc)
                self.buf[n] = self.buf.get(n, torch.zeros_like(g[n])).lerp(g[n], 1 - mu)
                d = g[n].lerp(self.buf[n], mu) if c.muon_nesterov else self.buf[n]
                rows, cols = w[n].shape
                k = (
                    0.2 * math.sqrt(max(rows, cols))
                    if c.muon_adjust_lr == "match_rms_adamw"
                    else (math.sqrt(max(1.0, rows / cols)))
                )
                lr_m = lr * c.muon_lr_mult
                out[n] = w[n] * (1 - lr_m * c.weight_decay) - lr_m * k * newton_schulz(d)
            else:
                b1, b2 = c.beta1, c.beta2
                self.m[n] = b1 * self.m.get(n, torch.zeros_like(g[n])) + (1 - b1) * g[n]
                self.v[n] = b2 * self.v.get(n, torch.zeros_like(g[n])) + (1 - b2) * g[n] ** 2
                m_hat, v_hat = self.m[n] / (1 - b1**self.t), self.v[n] / (1 - b2**self.t)
                wd = c.weight_decay if w[n].dim() == 2 else 0.0
                out[n] = w[n] * (1 - lr * wd) - lr * m_hat / (v_hat.sqrt() + c.eps)
        return out


@pytest.mark.parametrize(
    "kw,extra",
    [
        (SWIGLU, {}),
        (GELU, {}),
        (SWIGLU, dict(muon_nesterov=False, muon_adjust_lr="original", muon_lr_mult=10.0, muon_momentum=0.9)),
    ],
    ids=["swiglu-match_rms", "gelu-match_rms", "swiglu-original-plain-momentum"],
)
def test_each_step_equals_plain_torch_muon_and_adamw(kw: dict, extra: dict) -> None:
    torch.manual_seed(0)
    cfg = GPTConfig(**kw)
    model = GPT(cfg)
    ocfg = OptimConfig(name="muon", lr=1e-2, warmup_steps=3, schedule="constant", weight_decay=0.1, **extra)
    opt = build_optimizer(model, ocfg, "cpu")
    schedule = torch.optim.lr_scheduler.LambdaLR(opt, lr_factor(ocfg, 6))
    oracle = Oracle(ocfg, hidden_names(cfg))
    data = torch.Generator().manual_seed(1)
    for t in range(6):
        batch = torch.randint(0, VOCAB, (8, T + 1), generator=data)
        logits = model(batch[:, :-1])
        F.cross_entropy(logits.reshape(-1, VOCAB), batch[:, 1:].reshape(-1)).backward()
        before = {n: p.detach().clone() for n, p in model.named_parameters()}
        want = oracle.step(
            before, {n: p.grad.clone() for n, p in model.named_parameters()}, ocfg.lr * min(1, (t + 1) / 3)
        )
        opt.step()
        schedule.step()
        opt.zero_grad()
        for n, p in model.named_parameters():
            got, expected = p.detach() - before[n], want[n] - before[n]
            err = float((got - expected).norm() / expected.norm())
            assert err < 1e-5, (t, n, err)


def test_state_dict_round_trip_continues_identically() -> None:
    """Both halves' state (Muon's momentum, AdamW's moments and step) saved and loaded into a new
    optimizer: the next steps are bit-identical to the uninterrupted one's."""
    torch.manual_seed(0)
    cfg, ocfg = GPTConfig(**SWIGLU), OptimConfig(name="muon", lr=1e-2, warmup_steps=2)
    models = [GPT(cfg), GPT(cfg)]
    models[1].load_state_dict(models[0].state_dict())
    opts = [build_optimizer(m, ocfg, "cpu") for m in models]
    batches = torch.randint(0, VOCAB, (6, 4, T + 1), generator=torch.Generator().manual_seed(2))

    def step(model: GPT, opt: torch.optim.Optimizer, batch: torch.Tensor) -> None:
        logits = model(batch[:, :-1])
        F.cross_entropy(logits.reshape(-1, VOCAB), batch[:, 1:].reshape(-1)).backward()
        opt.step()
        opt.zero_grad()

    for b in batches[:3]:
        for m, o in zip(models, opts, strict=True):
            step(m, o, b)
    saved = opts[1].state_dict()
    assert {"momentum_buffer", "exp_avg", "exp_avg_sq"} <= {k for s in saved["state"].values() for k in s}
    opts[1] = build_optimizer(models[1], ocfg, "cpu")
    opts[1].load_state_dict(saved)
    for b in batches[3:]:
        for m, o in zip(models, opts, strict=True):
            step(m, o, b)
    for (n, a), b in zip(models[0].named_parameters(), models[1].parameters(), strict=True):
        assert torch.equal(a, b), n


# ---- through train.py's path --------------------------------------------------------------------------
def test_optim_muon_trains_the_default_run_shortened(tmp_path: Path, cache: Path) -> None:
    """`python train.py optim=muon` (the default model and data, 30 steps instead of 500): the loss
    falls, the update ratio is logged for every block."""
    train_here(
        tmp_path / "run",
        cache,
        "model.n_layer=4",
        "model.n_embd=128",
        "model.n_head=4",
        "model.block_size=256",
        "data.batch_size=8",
        "data.max_bytes=null",
        "optim=muon",
        "trainer.max_steps=30",
        "trainer.val_check_interval=30",
        "trainer.log_every_n_steps=5",
    )
    loss = series(tmp_path / "run", "train/loss")
    steps = sorted(loss)
    assert steps[-1] == 29 and loss[29] < loss[steps[0]] - 1.0, loss
    ratio = series(tmp_path / "run", "update_ratio/block_03")
    assert ratio and all(0 < r < 1 for r in ratio.values()), ratio


RESUME = [
    "optim=muon",
    "trainer.max_steps=8",
    "trainer.deterministic=true",
    "trainer.val_check_interval=4",
    "callbacks.checkpoint_every_n_steps=4",
    "optim.warmup_steps=2",
]


def test_resume_under_muon_is_bit_identical(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stopped after the step-4 checkpoint and resumed from it: the losses of steps 4-7 equal the
    straight run's exactly (the momentum buffers and AdamW's moments are in the checkpoint)."""
    import lightning as L

    from tests.training.rel_harness import with_callbacks

    class Crash(L.Callback):
        def on_train_batch_start(self, trainer: L.Trainer, *a: object) -> None:
            if trainer.global_step == 5:
                raise RuntimeError("simulated crash")

    train_here(tmp_path / "full", cache, *RESUME)
    with monkeypatch.context() as mp:
        with_callbacks(mp, Crash())
        with pytest.raises(RuntimeError, match="simulated crash"):
            train_here(tmp_path / "crashed", cache, *RESUME)
    ckpt = tmp_path / "crashed" / "checkpoints" / "last.ckpt"
    state = torch.load(ckpt, weights_only=True)["optimizer_states"][0]["state"]
    assert sum("momentum_buffer" in s for s in state.values()) == len(hidden_names(GPTConfig(n_layer=2)))
    train_here(tmp_path / "resumed", cache, *RESUME, f"ckpt_path={ckpt}")
    full, again = series(tmp_path / "full", "train/loss"), series(tmp_path / "resumed", "train/loss")
    assert sorted(again) == [4, 5, 6, 7]
    assert {s: again[s] for s in again} == {s: full[s] for s in again}


def test_telemetry_under_muon_equals_the_measured_tensors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Grad norms, clip factor, update ratio and parameter norms mean what they mean under AdamW:
    telemetry reads weights before and after the step, not optimizer state (the AdamW oracle test's
    probe, on an optim=muon run)."""
    from tests.oracle import test_telemetry_measured as measured

    history, probe = measured.train_here(
        tmp_path / "run", tmp_path / "cache", monkeypatch, "optim.grad_clip=0.02", "optim=muon"
    )
    measured.check_against_probe(history, probe, 0.02)


def _error(tmp_path: Path, cache: Path, *overrides: str) -> str:
    try:
        train_here(tmp_path / "bad", cache, "trainer.max_steps=2", "trainer.val_check_interval=2", *overrides)
    except USER_ERRORS as err:
        return one_line(err)
    raise AssertionError(f"{overrides} did not fail")


BAD = [
    (
        ["optim=muon", "trainer=fsdp"],
        "error: optim.name=muon cannot be combined with trainer.strategy=fsdp: Muon's Newton–Schulz step "
        "needs each whole matrix and FSDP2 holds row shards (DTensor); use trainer.strategy=ddp or auto",
    ),
    (
        ["optim=muon", "model.parametrization=mup", "model.mup_base_width=32"],
        "error: optim.name=muon cannot be combined with model.parametrization=mup: μP's LR and ε multipliers "
        "are AdamW's rules (Muon's shape rule is optim.muon_adjust_lr); use model.parametrization=sp",
    ),
    (["optim.name=sgd"], "error: optim.name='sgd' is not accepted; choose one of adamw, muon"),
    (
        ["optim=muon", "optim.muon_adjust_lr=spectral"],
        "error: optim.muon_adjust_lr='spectral' is not accepted; choose one of match_rms_adamw, original "
        "(torch.optim.Muon's adjust_lr_fn)",
    ),
    (
        ["optim=muon", "optim.muon_ns_steps=0"],
        "error: optim.muon_ns_steps=0 is not accepted; give an integer in [1, 99] (Newton–Schulz iterations)",
    ),
    (
        ["optim=muon", "optim.muon_momentum=1"],
        "error: optim.muon_momentum=1.0 is not accepted; give a number in [0, 1)",
    ),
]


@pytest.mark.parametrize("overrides,line", BAD, ids=[" ".join(o) for o, _ in BAD])
def test_bad_muon_inputs_give_one_line(overrides: list[str], line: str, tmp_path: Path, cache: Path) -> None:
    assert _error(tmp_path, cache, *overrides) == line


def test_resuming_an_adamw_checkpoint_with_muon_is_refused(
    tmp_path: Path, cache: Path, trained: Path
) -> None:
    ckpt = trained / "checkpoints" / "last.ckpt"
    got = _error(tmp_path, cache, "optim=muon", f"ckpt_path={ckpt}")
    assert got == (
        f"error: ckpt_path={str(ckpt)!r} was trained with optim.name=adamw but optim.name=muon now: its "
        "optimizer state is adamw's; resume with optim=adamw, or start a new run"
    )


def test_ablate_optim_quick_runs_and_reports_both_arms(tmp_path: Path) -> None:
    """`python train.py -m experiment=ablate_optim_quick hydra.launcher.slots=2 hydra.launcher.threads=1`:
    8 jobs of AdamW and Muon, a report with the arm − baseline row; each arm's checkpoint holds its
    own optimizer (Muon's momentum buffers only in the muon jobs)."""
    import json

    from tests.conftest import QUICK_ENV, run_script

    out = tmp_path / "sweep"
    proc = run_script(
        "train.py", "-m", "experiment=ablate_optim_quick", "hydra.launcher.slots=2",
        "hydra.launcher.threads=1", f"hydra.sweep.dir={out}", f"data.cache_dir={tmp_path / 'cache'}",
        "logger=csv", env=QUICK_ENV, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = (out / "report.md").read_text()
    assert "8 job(s): 8 finished" in report and "| `muon` | `adamw` |" in report
    for k in range(8):
        ckpt = torch.load(out / str(k) / "checkpoints" / "last.ckpt", weights_only=True)
        name = ckpt["hyper_parameters"]["optim"]["name"]
        buffers = any("momentum_buffer" in s for s in ckpt["optimizer_states"][0]["state"].values())
        assert json.loads((out / str(k) / "metrics.json").read_text())["status"] == "finished"
        assert buffers == (name == "muon"), (k, name)
    assert {
        torch.load(out / str(k) / "checkpoints" / "last.ckpt", weights_only=True)["hyper_parameters"][
            "optim"
        ]["name"]
        for k in range(8)
    } == {"adamw", "muon"}


def test_optim_muon_defaults_to_its_measured_best_lr() -> None:
    """optim=muon's lr is Muon's best LR of the committed ablate_optim measurement (docs/optim.md,
    "Measured"), a point of that preset's grid; the sweep's jobs still set their own LR."""
    import re

    import numpy as np

    from gptlab.compose import compose_config, compose_with_hydra

    measured = (REPO / "docs" / "optim.md").read_text().split("## Measured")[1]
    muon_best = float(re.search(r"Muon \d\.\d+ \[[^]]+\] at ([0-9.e-]+)", measured).group(1))
    adamw_best = float(re.search(r"AdamW \d\.\d+ \[[^]]+\] at ([0-9.e-]+)", measured).group(1))
    assert compose_config(["optim=muon"]).optim.lr == muon_best == 1.28e-2
    assert compose_config([]).optim.lr == 2e-3  # AdamW's default is unchanged
    assert muon_best / adamw_best == pytest.approx(5.5, abs=0.05)
    sweep = compose_with_hydra(["experiment=ablate_optim"]).hydra.sweeper.lr
    grid = np.geomspace(sweep.min, sweep.max, sweep.points)
    assert np.min(np.abs(grid / muon_best - 1)) < 5e-3  # the preset's grid holds it
    job = compose_config(["experiment=ablate_optim", "optim=muon", f"optim.lr={grid[0]}"])
    assert job.optim.lr == grid[0] and job.optim.min_lr == 2e-4  # a grid job's LR is the grid's
