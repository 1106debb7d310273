"""Two small pieces of attention math against values worked out by hand, in milliseconds: Gemma 2's
soft cap c·tanh(x/c) (Gemma Team 2024, "Gemma 2: Improving Open Language Models at a Practical Size",
arXiv:2408.00118, §2: logits ← c·tanh(logits/c), c = 50 on attention and 30 on the output logits), and
the attention telemetry's sink (attention_stats: each query row's softmax mass on key 0, over the rows
t >= 1, and how many such rows there are).

The sink's oracle needs no softmax code: with all-zero queries every causal row is uniform, so row t
puts 1/(t+1) on key 0 and has entropy ln(t+1); with one key of logit L and t of logit 0, row t puts
e^L/(e^L + t) on it."""

from __future__ import annotations

import math

import pytest
import torch

from gptlab.model.attention import softcap
from gptlab.training.callbacks.attention_stats import attention_stats


@pytest.mark.parametrize("cap", [0.5, 5.0, 50.0])
def test_softcap_is_c_times_y_at_c_artanh_y(cap: float) -> None:
    """softcap(c·artanh(y)) = c·y for y in (-1, 1) (artanh is tanh's inverse: no tanh in the oracle);
    about x - x³/(3c²) for |x| << c; c itself, never more, far beyond it."""
    y = torch.linspace(-0.999, 0.999, 201, dtype=torch.float64)
    torch.testing.assert_close(softcap(cap * torch.atanh(y), cap), cap * y, rtol=1e-12, atol=1e-12)
    small = torch.tensor([1e-3, -2e-3, 5e-3], dtype=torch.float64) * cap
    torch.testing.assert_close(softcap(small, cap), small - small**3 / (3 * cap**2), rtol=1e-9, atol=0)
    far = torch.tensor([1e3, -1e6], dtype=torch.float64) * cap
    assert softcap(far, cap).tolist() == [cap, -cap]


def test_sink_of_uniform_causal_rows_is_the_harmonic_sum() -> None:
    """q = 0: row t is uniform over keys 0..t, so its sink is 1/(t+1) and its entropy ln(t+1); row 0
    (all its mass on key 0, necessarily) is not a sink row."""
    B, H, T, D = 2, 3, 7, 4
    top, ent, rows, sink, sink_rows = attention_stats(torch.zeros(B, H, T, D), torch.randn(B, H, T, D))
    assert (rows, sink_rows) == (B * H * T, B * H * (T - 1))
    assert float(top) == 0.0
    assert float(sink) == pytest.approx(B * H * sum(1 / (t + 1) for t in range(1, T)), rel=1e-6)
    assert float(ent) == pytest.approx(B * H * sum(math.log(t + 1) for t in range(T)), rel=1e-6)


@pytest.mark.parametrize("cap", [None, 2.0])
def test_sink_of_one_loud_first_key(cap: float | None) -> None:
    """One head, D = 1, q = 1, key 0 = L and the others 0, scale 1: row t's logits are (L, 0, ..., 0),
    its sink e^s/(e^s + t) with s = L, or c·tanh(L/c) under the cap (the logits the softmax sees)."""
    T, L = 5, 3.0
    q = torch.ones(1, 1, T, 1)
    k = torch.zeros(1, 1, T, 1)
    k[0, 0, 0, 0] = L
    top, _, _, sink, sink_rows = attention_stats(q, k, scale=1.0, cap=cap)
    s = L if cap is None else cap * math.tanh(L / cap)
    assert float(top) == pytest.approx(s, rel=1e-6)
    assert sink_rows == T - 1
    assert float(sink) == pytest.approx(sum(math.exp(s) / (math.exp(s) + t) for t in range(1, T)), rel=1e-6)


def test_sink_is_zero_in_rows_whose_window_hides_key_0() -> None:
    """A window of 2 (key >= query - 1): only row 1 still sees key 0 (half its mass, q = 0); rows
    2..T-1 count as sink rows with 0."""
    T = 6
    i = torch.arange(T)
    window = (i[None, :] <= i[:, None]) & (i[:, None] - i[None, :] < 2)
    _, ent, _, sink, sink_rows = attention_stats(
        torch.zeros(1, 2, T, 4), torch.randn(1, 2, T, 4), mask=window
    )
    assert sink_rows == 2 * (T - 1)
    assert float(sink) == pytest.approx(2 * 0.5, rel=1e-6)
    assert float(ent) == pytest.approx(2 * (T - 1) * math.log(2), rel=1e-6)  # rows 1.. uniform over 2 keys
