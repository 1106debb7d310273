"""The run-end figures show their input: the heat map's image is the matrix on its log colour scale,
the depth profile's lines are the matrix's columns, the log tick labels are the ticks matplotlib's
own formatter labels with the values it gives them, and no text falls outside the canvas (the
fixed margins that replaced tight_layout). Oracles: the input itself, LogFormatterSciNotation's
mathtext labels (parsed here, not by gptlab), the canvas's box."""

from __future__ import annotations

import math
import re
import unicodedata

import numpy as np
import pytest
from matplotlib.colors import LogNorm
from matplotlib.ticker import LogFormatterSciNotation

from gptlab.figures import depth_figure, heatmap_figure

# (layers, log steps, lowest, highest): the 20-step bench's narrow ranges, decades, a deep model
SHAPES = [(4, 1, 0.2266, 0.2514), (4, 2, 0.238, 0.934), (12, 60, 1e-3, 30.0), (48, 200, 0.05, 2e3)]


def _matrix(layers: int, n_steps: int, low: float, high: float) -> tuple[list[list[float]], list[int]]:
    rng = np.random.default_rng(layers * 1000 + n_steps)
    m = np.exp(rng.uniform(math.log(low), math.log(high), size=(layers, n_steps)))
    m.flat[0], m.flat[-1] = low, high
    return m.tolist(), [500 * (s + 1) for s in range(n_steps)]


def _mathtext_value(label: str) -> float:
    """10^e or c×10^e from matplotlib's own "$\\mathdefault{c\\times10^{e}}$"."""
    hit = re.fullmatch(r"\$\\mathdefault\{(?:([\d.]+)\\times)?10\^\{(-?\d+)\}\}\$", label)
    assert hit, label
    return float(hit.group(1) or 1) * 10.0 ** int(hit.group(2))


def _unicode_value(label: str) -> float:
    """The same from "c×10ᵉ" (superscript digits, ⁻ for the exponent's sign)."""
    hit = re.fullmatch(r"(?:([\d.]+)×)?10([⁻⁰¹²³⁴⁵⁶⁷⁸⁹]+)", label)
    assert hit, label
    exp = hit.group(2)
    digits = int("".join(str(unicodedata.digit(c)) for c in exp.lstrip("⁻")))
    return float(hit.group(1) or 1) * 10.0 ** (-digits if exp.startswith("⁻") else digits)


def _labels_against_matplotlib(axis) -> int:  # noqa: ANN001 (a matplotlib Axis)
    """Each drawn tick's label against a stock LogFormatterSciNotation's on the same axis and ticks:
    labelled at the same ticks, with the same values. Returns the labels compared."""
    n = 0
    for minor in (False, True):
        ticks = axis.get_minor_ticks() if minor else axis.get_major_ticks()
        locs = axis.get_minorticklocs() if minor else axis.get_majorticklocs()
        stock = LogFormatterSciNotation(labelOnlyBase=not minor)
        stock.set_axis(axis)
        expected = stock.format_ticks(list(locs))
        drawn = [t.label1.get_text() for t in ticks[: len(locs)]]
        for loc, ours, theirs in zip(locs, drawn, expected, strict=True):
            assert bool(ours) == bool(theirs), (loc, ours, theirs)
            if ours:
                assert "$" not in ours, ours  # no mathtext left
                assert _unicode_value(ours) == pytest.approx(_mathtext_value(theirs), rel=1e-9)
                n += 1
    return n


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_heatmap_shows_the_matrix_on_its_log_scale(shape: tuple[int, int, float, float]) -> None:
    matrix, steps = _matrix(*shape)
    fig = heatmap_figure(matrix, steps, title="max attention logit", label="max logit")
    ax, cax = fig.axes
    (image,) = ax.images
    np.testing.assert_array_equal(np.asarray(image.get_array()), np.asarray(matrix))
    assert isinstance(image.norm, LogNorm)
    assert (image.norm.vmin, image.norm.vmax) == (shape[2], shape[3])
    assert image.get_cmap().name == "viridis" and image.origin == "lower"
    assert (ax.get_title(), ax.get_xlabel(), ax.get_ylabel()) == ("max attention logit", "step", "block")
    assert cax.get_ylabel() == "max logit"
    ticks = [int(t) for t in ax.get_xticks()]
    assert [lab.get_text() for lab in ax.get_xticklabels()] == [str(steps[t]) for t in ticks]
    assert list(ax.get_yticks()) == list(range(shape[0]))
    fig.canvas.draw()
    assert _labels_against_matplotlib(cax.yaxis) >= 2


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_depth_profile_draws_the_columns(shape: tuple[int, int, float, float]) -> None:
    matrix, steps = _matrix(*shape)
    fig = depth_figure(matrix, steps)
    (ax,) = fig.axes
    cols = sorted({0, len(steps) - 1, round((len(steps) - 1) / 3), round(2 * (len(steps) - 1) / 3)})
    assert [line.get_label() for line in ax.get_lines()] == [f"step {steps[c]}" for c in cols]
    for line, c in zip(ax.get_lines(), cols, strict=True):
        assert list(line.get_xdata()) == list(range(shape[0]))
        assert list(line.get_ydata()) == [row[c] for row in matrix]
    assert ax.get_yscale() == "log"
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("block index (input → output)", "L2 norm")
    fig.canvas.draw()
    assert _labels_against_matplotlib(ax.yaxis) >= 1


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_no_text_outside_the_canvas(shape: tuple[int, int, float, float]) -> None:
    """The fixed margins hold every label (tight_layout's job before): the box of everything drawn
    (what savefig's bbox_inches="tight" would crop to) lies within the canvas."""
    matrix, steps = _matrix(*shape)
    title = "max attention logit q·k/√d_h"
    for fig in (heatmap_figure(matrix, steps, title=title), depth_figure(matrix, steps)):
        fig.canvas.draw()
        drawn, canvas = fig.get_tightbbox(fig.canvas.get_renderer()), fig.bbox_inches
        assert drawn.x0 >= canvas.x0 and drawn.y0 >= canvas.y0, (drawn, canvas)
        assert drawn.x1 <= canvas.x1 and drawn.y1 <= canvas.y1, (drawn, canvas)
        assert drawn.width > 0.8 * canvas.width  # the labels are there: nothing was dropped
