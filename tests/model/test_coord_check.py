"""μP's coordinate check (scripts/coord_check.py, gptlab.analysis.coord_check): widths 32 → 256 (the
script's default is 64 → 1024; smaller here for time), 4 Adam steps at one LR on one batch.

Bound: under μP every probe's slope of log2 RMS on log2 width is within ±0.35 (less than 2.1× over the
8× of width); under SP the logits grow at ≥ 0.6 and every block's output at ≥ 1.0 (measured
2026-12-03: SP 0.93 logits, 2.0–2.7 blocks; μP −0.25 to 0.0). The second oracle is the plain-PyTorch μP
model of tests/model/test_mup.py with its own init from the paper's formula: its logits are flat too,
and ours (same architecture) agree with it within 0.15 in slope.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from gptlab.analysis.coord_check import coord_check, slopes
from gptlab.model import GPTConfig
from tests.conftest import run_script
from tests.model.test_mup import oracle_adamw, oracle_logits

WIDTHS = [32, 64, 128, 256]
BOUND = 0.35


def _sizes(par: str, **extra) -> dict[int, dict[str, float]]:
    cfg = GPTConfig(n_layer=2, n_head=2, n_embd=32, block_size=32, parametrization=par, mup_base_width=32,
                    **extra)  # fmt: skip
    return coord_check(cfg, WIDTHS, lr=1e-2, steps=4, seeds=1)


def test_mup_is_flat_in_width_and_sp_grows() -> None:
    mup, sp = slopes(_sizes("mup")), slopes(_sizes("sp"))
    assert set(mup) == {"tok_emb", "logits"} | {
        f"blocks.{i}{s}" for i in (0, 1) for s in ("", ".attn", ".ffn")
    }
    assert all(abs(v) <= BOUND for v in mup.values()), mup
    assert sp["logits"] >= 0.6, sp
    assert all(sp[f"blocks.{i}"] >= 1.0 for i in (0, 1)), sp


def _oracle_logit_rms(d: int, base: int = 32, heads: int = 2, layers: int = 2, steps: int = 4) -> float:
    """The test's own μP model: init σ 0.02 (embeddings), 0.02·sqrt(base/fan_in·...) per the paper."""
    torch.manual_seed(0)
    s, m, V, T = 0.02, d / base, 256, 32
    shapes = {"tok_emb.weight": ((V, d), s), "pos_emb.weight": ((T, d), s), "final_norm.weight": ((d,), None)}
    for i in range(layers):
        p = f"blocks.{i}."
        shapes |= {p + "attn_norm.weight": ((d,), None), p + "ffn_norm.weight": ((d,), None)}
        shapes |= {p + f"attn.{n}_proj.weight": ((d, d), s / math.sqrt(m)) for n in "qkv"}
        shapes |= {p + "attn.out_proj.weight": ((d, d), s / math.sqrt(2 * layers * m))}
        shapes |= {p + "ffn.up_proj.weight": ((4 * d, d), s / math.sqrt(m))}
        shapes |= {p + "ffn.down_proj.weight": ((d, 4 * d), s / math.sqrt(2 * layers * m))}
    P = {
        n: torch.nn.Parameter(torch.ones(shape) if sigma is None else torch.randn(shape) * sigma)
        for n, (shape, sigma) in shapes.items()
    }
    batch = torch.randint(0, V, (8, T + 1), generator=torch.Generator().manual_seed(0))
    x, y = batch[:, :-1], batch[:, 1:]
    opt = oracle_adamw(P, d, base)
    for group in opt.param_groups:  # the coordinate check's setting: no decay
        group["weight_decay"] = 0.0
        group["lr"] *= 1e-2 / 3e-3
    for _ in range(steps):
        opt.zero_grad()
        F.cross_entropy(
            oracle_logits(P, d, base, heads, layers, True, x).flatten(0, 1), y.flatten()
        ).backward()
        opt.step()
    with torch.no_grad():
        return oracle_logits(P, d, base, heads, layers, True, x).pow(2).mean().sqrt().item()


def test_the_plain_pytorch_mup_model_is_flat_too_and_agrees_with_ours() -> None:
    oracle = float(np.polyfit(np.log2(WIDTHS), np.log2([_oracle_logit_rms(d) for d in WIDTHS]), 1)[0])
    ours = slopes(_sizes("mup", ffn="gelu", pos_emb="learned"))["logits"]
    assert abs(oracle) <= BOUND
    assert ours == pytest.approx(oracle, abs=0.15)


def test_cli_writes_the_figure_and_the_slopes(tmp_path) -> None:
    proc = run_script("scripts/coord_check.py", "--widths", "32,64", "--base", "32", "--steps", "1",
                      "--seeds", "1", "--heads", "2", "--out", str(tmp_path))  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (tmp_path / "coord_check.png").stat().st_size > 10_000
    assert "logits" in proc.stdout and "mup" in proc.stdout


def test_cli_bad_widths_one_line_exit_2(tmp_path) -> None:
    """Refused before any training: with a million steps, a run of SP's arm first (SP accepts 48)
    would outlast the timeout."""
    proc = run_script("scripts/coord_check.py", "--widths", "32,48", "--base", "32", "--steps", "1000000",
                      "--out", str(tmp_path), timeout=120)  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "error: model.mup_base_width=32 does not divide model.n_embd=48; "
        "accepted: a divisor of n_embd (the width multiplier "
        "n_embd/mup_base_width must be a whole number >= 1)"
    ]
    assert not (tmp_path / "coord_check.png").exists()
