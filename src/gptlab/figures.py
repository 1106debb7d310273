"""The pictures researchers look at: layer × step heat maps, depth profiles, loss curves (PNG).

Figures are drawn by Agg directly (matplotlib.figure.Figure, no pyplot: no registry of open figures
to close). The two a run draws at its end (grad_heatmap, depth_profile) have fixed margins instead of
tight_layout, which lays every label out once more before the draw, and write their log-scale tick
labels in Unicode (10⁻¹, 3×10⁻¹) instead of mathtext, whose parser costs ~10 ms a distinct label:
the same ticks labelled with the same values (tests/test_figures.py)."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.colors import LogNorm  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import LogFormatterSciNotation  # noqa: E402

_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


class UnicodeLogFormatter(LogFormatterSciNotation):
    """Matplotlib's log-axis labels (the same ticks labelled, the same values) as plain Unicode text:
    "$\\mathdefault{3\\times10^{-1}}$" becomes "3×10⁻¹", drawn without the mathtext parser."""

    def __call__(self, x: float, pos: int | None = None) -> str:
        label = super().__call__(x, pos)
        inner = re.fullmatch(r"\$\\mathdefault\{(.*)\}\$", label)
        if inner is None:
            return label
        text = inner.group(1).replace("\\times", "×")
        text = re.sub(r"\^\{(-?\d+)\}", lambda e: e.group(1).translate(_SUPERSCRIPT), text)
        return text.replace("-", "\N{MINUS SIGN}")  # a sign (mathtext draws "-" as a minus)


def unicode_log_ticks(axis: Any) -> None:
    """Give a log-scaled axis UnicodeLogFormatter labels with LogScale's own settings: decades on
    the major ticks, minor ones labelled where the range is short."""
    axis.set_major_formatter(UnicodeLogFormatter())
    axis.set_minor_formatter(UnicodeLogFormatter(labelOnlyBase=False))


def _figure(width: float, height: float, layout: str | None = None) -> Figure:
    """A figure that Agg draws and writes (savefig) with no pyplot state."""
    fig = Figure(figsize=(width, height), layout=layout)
    FigureCanvasAgg(fig)
    return fig


def _inches(fig: Figure, left: float, bottom: float, right: float, top: float) -> list[float]:
    """[left, bottom, width, height] in figure fractions of a box with these margins in inches."""
    w, h = fig.get_size_inches()
    return [left / w, bottom / h, 1 - (left + right) / w, 1 - (bottom + top) / h]


def heatmap_figure(
    matrix: Sequence[Sequence[float]],
    steps: Sequence[int],
    title: str = "gradient norm",
    label: str = "L2 norm",
) -> Figure:
    """Layers (rows, input at the bottom) × log steps (columns), log colour scale; a colour bar of
    fixed width on the right, its labels in the fixed right margin."""
    fig = _figure(8, 0.35 * len(matrix) + 2)
    ax = fig.add_axes(_inches(fig, 0.6, 0.5, 1.45, 0.35))
    cax = fig.add_axes(_inches(fig, 8 - 1.3, 0.5, 1.15, 0.35))
    finite = [v for row in matrix for v in row if v > 0 and math.isfinite(v)]
    norm = LogNorm(vmin=min(finite), vmax=max(finite)) if finite else None
    im = ax.imshow(matrix, aspect="auto", origin="lower", norm=norm, cmap="viridis", interpolation="nearest")
    ax.set_xlabel("step")
    ax.set_ylabel("block")
    ticks = list(range(0, len(steps), max(1, len(steps) // 8)))
    ax.set_xticks(ticks, [str(steps[t]) for t in ticks])
    ax.set_yticks(range(len(matrix)))
    ax.set_title(title)
    bar = fig.colorbar(im, cax=cax, label=label)
    if norm is not None:  # through the colour bar, whose update_ticks would restore its own
        bar.formatter = UnicodeLogFormatter()
        bar.minorformatter = UnicodeLogFormatter(labelOnlyBase=False)
    return fig


def grad_heatmap(
    matrix: Sequence[Sequence[float]],
    steps: Sequence[int],
    path: Path,
    title: str = "gradient norm",
    label: str = "L2 norm",
) -> Path:
    """heatmap_figure, written to `path`."""
    heatmap_figure(matrix, steps, title, label).savefig(path, dpi=110)
    return path


def depth_figure(
    matrix: Sequence[Sequence[float]],
    steps: Sequence[int],
    n_curves: int = 4,
    title: str = "gradient norm by depth",
) -> Figure:
    """Norm against block index at a few steps (first, last and evenly in between), log y."""
    fig = _figure(6, 4)
    ax = fig.add_axes(_inches(fig, 1.15, 0.55, 0.15, 0.35))
    cols = sorted({round(k * (len(steps) - 1) / max(1, n_curves - 1)) for k in range(n_curves)})
    for c in cols:
        ax.plot(range(len(matrix)), [row[c] for row in matrix], marker="o", label=f"step {steps[c]}")
    ax.set_yscale("log")
    unicode_log_ticks(ax.yaxis)
    ax.set_xticks(range(len(matrix)))  # blocks are integers: no 0.5 ticks
    ax.set_xlabel("block index (input → output)")
    ax.set_ylabel("L2 norm")
    ax.set_title(title)
    ax.legend()
    return fig


def depth_profile(
    matrix: Sequence[Sequence[float]],
    steps: Sequence[int],
    path: Path,
    n_curves: int = 4,
    title: str = "gradient norm by depth",
) -> Path:
    """depth_figure, written to `path`."""
    depth_figure(matrix, steps, n_curves, title).savefig(path, dpi=110)
    return path


def curves(
    series: dict[str, tuple[Sequence[float], Sequence[float]]],
    path: Path,
    xlabel: str,
    ylabel: str,
    title: str = "",
    logy: bool = False,
) -> Path:
    """Several named (x, y) curves on one axis."""
    fig = _figure(7, 4.5)
    ax = fig.subplots()
    for name, (x, y) in series.items():
        ax.plot(x, y, label=name, marker="o" if len(x) < 12 else None)
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if series:
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path


def _grid(n: int, ncols: int, width: float, height: float) -> tuple[Figure, list[Axes]]:
    """A figure of n panels in rows of ncols, returned as a flat list (unused panels hidden)."""
    ncols = max(1, min(ncols, n))
    nrows = max(1, math.ceil(n / ncols))
    fig = _figure(width * ncols, height * nrows, layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False)
    flat = [ax for row in axes for ax in row]
    for ax in flat[n:]:
        ax.set_visible(False)
    return fig, flat[:n]


def heatmap_grid(
    panels: Sequence[tuple[str, Sequence[Sequence[float]], Sequence[int]]],
    path: Path,
    title: str = "gradient norm per block",
    ncols: int = 4,
) -> Path:
    """One layer × step heat map per variant, all on one log colour scale so panels compare."""
    finite = [v for _, m, _ in panels for row in m for v in row if v > 0 and math.isfinite(v)]
    norm = LogNorm(vmin=min(finite), vmax=max(finite)) if finite else None
    fig, axes = _grid(len(panels), ncols, 4.0, 3.4)
    im = None
    for ax, (label, matrix, steps) in zip(axes, panels, strict=True):
        if not matrix or not steps:
            ax.text(0.5, 0.5, "no grad_norm data", ha="center", va="center", transform=ax.transAxes)
            ax.set_title(label, fontsize=8)
            continue
        im = ax.imshow(
            matrix, aspect="auto", origin="lower", norm=norm, cmap="viridis", interpolation="nearest"
        )
        ticks = list(range(0, len(steps), max(1, len(steps) // 4)))
        ax.set_xticks(ticks, [str(steps[t]) for t in ticks], fontsize=7)
        yt = list(range(0, len(matrix), max(1, len(matrix) // 6)))
        ax.set_yticks(yt, [str(t) for t in yt], fontsize=7)
        ax.set_title(label, fontsize=8)
        ax.set_xlabel("step", fontsize=7)
        ax.set_ylabel("block (input at bottom)", fontsize=7)
    if im is not None:
        fig.colorbar(im, ax=axes, label="L2 norm (log scale)", shrink=0.6)
    fig.suptitle(title)
    fig.savefig(path, dpi=100)
    return path


Series = dict[str, tuple[Sequence[float], Sequence[float]]]


def curve_panels(
    panels: dict[str, Series],
    path: Path,
    xlabel: str,
    ylabel: str,
    title: str = "",
    logx: bool = False,
    logy: bool = False,
    ncols: int = 2,
    markers: bool | None = None,
    dots: dict[str, Series] | None = None,
) -> Path:
    """Named curves in named panels (shared y); `dots` adds points in the same colours (e.g. val
    losses over train curves). Non-finite y values are drawn as red crosses at the panel's top,
    so a diverged run stays visible instead of silently vanishing."""
    fig, axes = _grid(len(panels), ncols, 6.0, 4.2)
    lows, highs = [], []
    for series in panels.values():
        for _, y in series.values():
            fin = [v for v in y if math.isfinite(v)]
            if fin:
                lows.append(min(fin))
                highs.append(max(fin))
    crosses_label = "non-finite (diverged)"
    for ax, (panel, series) in zip(axes, panels.items(), strict=True):
        crossed = False
        for k, (name, (x, y)) in enumerate(series.items()):
            color = f"C{k % 10}" if len(series) <= 10 else matplotlib.colormaps["tab20"](k % 20)
            style = "-" if len(series) <= 10 or k < 20 else "--"
            pts = [(a, b) for a, b in zip(x, y, strict=True) if math.isfinite(b)]
            bad = [a for a, b in zip(x, y, strict=True) if not math.isfinite(b)]
            use_markers = markers if markers is not None else len(x) < 12
            ax.plot(
                [p[0] for p in pts],
                [p[1] for p in pts],
                style,
                color=color,
                label=name,
                marker="o" if use_markers else None,
                markersize=4,
            )
            if bad:
                _mark_failures(ax, bad, None if crossed else crosses_label)
                crossed = True
            if dots and name in dots.get(panel, {}):
                dx, dy = dots[panel][name]
                ax.plot(dx, dy, "o", color=color, markersize=4, markeredgecolor="black", mew=0.5)
        if logx:
            ax.set_xscale("log")
        if logy:
            ax.set_yscale("log")
        if lows and highs and not logy:
            pad = 0.05 * (max(highs) - min(lows) or 1.0)
            ax.set_ylim(min(lows) - pad, max(highs) + pad)
        _label_panel(ax, panel, xlabel, ylabel, bool(series))
    return _save(fig, path, title)


Band = tuple[Sequence[float], Sequence[float], Sequence[float], Sequence[float], Sequence[float]]


def band_panels(
    panels: dict[str, dict[str, Band]],
    path: Path,
    xlabel: str,
    ylabel: str,
    title: str = "",
    ncols: int = 2,
) -> Path:
    """Per panel, one line per name: (x, mean, low, high, x of failures). The band spans low–high;
    failures (diverged runs) are red crosses at the panel's top. Log x, shared y."""
    fig, axes = _grid(len(panels), ncols, 6.0, 4.2)
    for ax, (panel, series) in zip(axes, panels.items(), strict=True):
        crossed = False
        for k, (name, (x, mean, low, high, bad)) in enumerate(series.items()):
            color = f"C{k % 10}"
            ax.plot(x, mean, "-o", color=color, label=name, markersize=4)
            ax.fill_between(x, low, high, color=color, alpha=0.2, linewidth=0)
            if bad:
                _mark_failures(ax, bad, None if crossed else "diverged (a seed)")
                crossed = True
        if any(x or bad for x, _, _, _, bad in series.values()):
            ax.set_xscale("log")
        else:  # every job of the panel failed or is missing: a log axis has nothing to scale
            ax.text(0.5, 0.5, "no finished run", ha="center", va="center", transform=ax.transAxes)
        _label_panel(ax, panel, xlabel, ylabel, any(x for x, *_ in series.values()))
    return _save(fig, path, title)


def _label_panel(ax: Any, panel: str, xlabel: str, ylabel: str, legend: bool) -> None:
    """A panel's title, axis labels, grid and (when it has lines) legend."""
    ax.set_title(panel, fontsize=9)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    if legend:
        ax.legend(fontsize=7)


def _save(fig: Any, path: Path, title: str) -> Path:
    """Title the figure, write it, free it."""
    if title:
        fig.suptitle(title)
    fig.savefig(path, dpi=100)
    return path


def _mark_failures(ax: Any, xs: Sequence[float], label: str | None) -> None:
    """Red crosses at the panel's top for runs that failed at these x (diverged: no y to plot)."""
    ax.plot(
        xs,
        [0.97] * len(xs),
        "x",
        color="red",
        markersize=9,
        mew=2,
        transform=ax.get_xaxis_transform(),
        label=label,
    )


def best_lr_vs_n(series: Sequence[Any], path: Path) -> Path:
    """Best LR against N per arm and parametrization (lr_transfer.ArmTransfer), log-log; a hollow
    marker where the best LR is its rung's grid edge (the optimum may lie beyond)."""
    fig = _figure(7, 4.5)
    ax = fig.subplots()
    colours: dict[str, str] = {}
    styles = {"sp": ("o", "--"), "mup": ("s", "-")}
    for s in series:
        colour = colours.setdefault(s.arm, f"C{len(colours)}")
        marker, line = styles.get(s.parametrization, ("^", ":"))
        rows = [r for r in s.rungs if r.lr is not None and r.n]
        if not rows:
            continue
        ax.plot([r.n for r in rows], [r.lr for r in rows], line, color=colour, alpha=0.6)
        for r in rows:
            face = "none" if r.at_edge else colour
            ax.plot(r.n, r.lr, marker, color=colour, markerfacecolor=face, markersize=8)
        ax.plot(
            [],
            [],
            line + marker,
            color=colour,
            label=f"{s.arm}, {s.parametrization}: {s.verdict.split(' (')[0]}",
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("N (non-embedding parameters)")
    ax.set_ylabel("best LR (the configured LR; μP: embeddings', hidden × 1/m)")
    ax.set_title("best LR against N (hollow: the rung's grid edge)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path
