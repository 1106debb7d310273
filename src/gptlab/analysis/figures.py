"""The pictures researchers look at: layer × step heat maps, depth profiles, loss curves (PNG)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.colors import LogNorm  # noqa: E402


def grad_heatmap(
    matrix: Sequence[Sequence[float]],
    steps: Sequence[int],
    path: Path,
    title: str = "gradient norm",
) -> Path:
    """Layers (rows, input at the bottom) × log steps (columns), log colour scale."""
    fig, ax = plt.subplots(figsize=(8, 0.35 * len(matrix) + 2))
    finite = [v for row in matrix for v in row if v > 0 and math.isfinite(v)]
    norm = LogNorm(vmin=min(finite), vmax=max(finite)) if finite else None
    im = ax.imshow(matrix, aspect="auto", origin="lower", norm=norm, cmap="viridis", interpolation="nearest")
    ax.set_xlabel("step")
    ax.set_ylabel("block")
    ticks = list(range(0, len(steps), max(1, len(steps) // 8)))
    ax.set_xticks(ticks, [str(steps[t]) for t in ticks])
    ax.set_yticks(range(len(matrix)))
    ax.set_title(title)
    fig.colorbar(im, ax=ax, label="L2 norm")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def depth_profile(
    matrix: Sequence[Sequence[float]],
    steps: Sequence[int],
    path: Path,
    n_curves: int = 4,
    title: str = "gradient norm by depth",
) -> Path:
    """Norm against block index at a few steps (first, last and evenly in between)."""
    fig, ax = plt.subplots(figsize=(6, 4))
    cols = sorted({round(k * (len(steps) - 1) / max(1, n_curves - 1)) for k in range(n_curves)})
    for c in cols:
        ax.plot(range(len(matrix)), [row[c] for row in matrix], marker="o", label=f"step {steps[c]}")
    ax.set_yscale("log")
    ax.set_xlabel("block index (input → output)")
    ax.set_ylabel("L2 norm")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
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
    fig, ax = plt.subplots(figsize=(7, 4.5))
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
    plt.close(fig)
    return path
