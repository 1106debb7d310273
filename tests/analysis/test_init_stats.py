"""Init statistics on a tiny model: the seeds' variance argument and Xiong et al.'s gradient picture."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from gptlab.analysis.init.report import init_report
from gptlab.analysis.init.stats import grad_profiles, residual_variance
from gptlab.model import GPTConfig

T = 32


@pytest.fixture(scope="module")
def tokens() -> torch.Tensor:
    """Real text (this repository's own source, as bytes): 4 windows of T+1 byte tokens."""
    data = (Path(__file__).resolve().parents[2] / "src/gptlab/analysis/report.py").read_bytes()
    return torch.tensor(list(data[: 4 * (T + 1)]), dtype=torch.long).view(4, T + 1)


def test_stream_variance_grows_without_depth_scaling_and_not_with_it(tokens: torch.Tensor) -> None:
    cfg = GPTConfig(n_layer=8, n_embd=32, n_head=4, block_size=T)
    profiles, sigma_b2 = residual_variance(cfg, tokens, seeds=(0, 1))
    none, glob, per = profiles["none"], profiles["global"], profiles["per_layer"]
    assert none.v0 == pytest.approx(glob.v0) == pytest.approx(per.v0)  # same embedding draw
    assert all(b > a for a, b in zip([none.v0, *none.stream], none.stream, strict=False))
    assert none.stream[-1] / none.v0 > 1.5
    assert glob.stream[-1] / glob.v0 < 1.2
    assert glob.stream[-1] < per.stream[-1] < none.stream[-1]
    assert sigma_b2 > 0
    # the seeds' line for none ends where the branch contributions add up to (2L·σ_b²)
    assert none.predicted[-1] == pytest.approx(none.v0 + 2 * cfg.n_layer * sigma_b2)
    # the independence assumption: the stream is close to v0 + Σ E[f²] (cross terms small)
    for p in profiles.values():
        for measured, no_cross in zip(p.stream, p.cumulative, strict=True):
            assert measured == pytest.approx(no_cross, rel=0.3)


def test_stream_variance_refuses_a_normalized_stream(tokens: torch.Tensor) -> None:
    cfg = GPTConfig(n_layer=2, n_embd=32, n_head=4, block_size=T, norm_placement="post")
    with pytest.raises(ValueError, match="norm_placement='post'"):
        residual_variance(cfg, tokens, seeds=(0,))


def test_post_norm_gradients_grow_toward_the_output_relative_to_pre_norm(tokens: torch.Tensor) -> None:
    # Xiong et al.'s setting: LayerNorm, ungated FFN, Xavier-like σ = 1/sqrt(d), no depth scaling
    cfg = GPTConfig(
        n_layer=8,
        n_embd=32,
        n_head=4,
        block_size=T,
        norm="layernorm",
        ffn="gelu",
        init_std="1/sqrt(d)",
        depth_scaled_init="none",
    )
    g = grad_profiles(cfg, tokens, ("pre", "post"), seeds=(0, 1, 2))
    assert len(g["pre"]) == len(g["post"]) == 8
    pre_slope = g["pre"][-1] / g["pre"][0]
    post_slope = g["post"][-1] / g["post"][0]
    assert pre_slope < 1.0  # pre-norm: the first blocks get the larger gradients at init
    assert post_slope > 1.5 * pre_slope


def test_init_report_writes_tables_and_figures(tokens: torch.Tensor, tmp_path: Path) -> None:
    cfg = GPTConfig(n_layer=3, n_embd=32, n_head=4, block_size=T, norm_placement="post")
    report = init_report(cfg, tokens, tmp_path, seeds=(0,), title="tiny")
    text = report.read_text()
    assert "Placement `pre`" in text and "placement is `post`" in text  # (a) switched to pre
    assert "| block | pre | post | sandwich | deepnorm |" in text
    for name in ("variance.png", "grad_profile.png"):
        assert (tmp_path / name).stat().st_size > 1000
