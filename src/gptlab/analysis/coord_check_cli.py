"""scripts/coord_check.py and scripts/depth_check.py: parse the sizes, check them, run the coordinate
check for two parametrizations side by side, write the figure and the JSON, print the slopes.

Each script passes its docstring as `usage`, so its --help stays where a user reads it.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gptlab.analysis.coord_check import coord_check, depth_check, slopes
from gptlab.model import GPTConfig

Sizes = dict[int, dict[str, float]]


def parse_width(argv: list[str], usage: str) -> argparse.Namespace:
    p = argparse.ArgumentParser(usage=usage)
    p.add_argument("--widths", default="64,128,256,512,1024")
    p.add_argument("--base", type=int, default=64)
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--lr", type=float, default=1e-2)
    p.add_argument("--seeds", type=int, default=2)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--out", default="outputs/coord_check")
    return p.parse_args(argv)


def parse_depth(argv: list[str], usage: str) -> argparse.Namespace:
    p = argparse.ArgumentParser(usage=usage)
    p.add_argument("--depths", default="2,4,8,16")
    p.add_argument("--width", type=int, default=64)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--lr", type=float, default=1e-2)
    p.add_argument("--seeds", type=int, default=2)
    p.add_argument("--out", default="outputs/depth_check")
    return p.parse_args(argv)


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def width_figure(results: dict[str, Sizes], path: Path) -> None:
    """One panel per parametrization: each probe's RMS against width, log-log (the paper's figure 5)."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(results), figsize=(5.5 * len(results), 4.2), sharey=True)
    for ax, (name, sizes) in zip(axes, results.items(), strict=True):
        widths = sorted(sizes)
        for probe in sizes[widths[0]]:
            ax.plot(widths, [sizes[w][probe] for w in widths], marker="o", label=probe)
        ax.set(xscale="log", yscale="log", xlabel="width (n_embd)", title=name)
        ax.set_xticks(widths, [str(w) for w in widths])
    axes[0].set_ylabel("RMS of the output after the Adam steps")
    axes[-1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def depth_figure(results: dict[str, Sizes], title: str, path: Path) -> None:
    """The stream's change against depth, one line per parametrization, log-log."""
    plt = _pyplot()
    depths = list(next(iter(results.values())))
    fig, ax = plt.subplots(figsize=(5.5, 4))
    for par, sizes in results.items():
        ax.plot(depths, [sizes[d]["stream update"] for d in depths], marker="o", label=par)
    ax.set(xscale="log", yscale="log", xlabel="depth (n_layer)", ylabel="RMS of the stream's change")
    ax.set_xticks(depths, [str(d) for d in depths])
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def width_results(args: argparse.Namespace) -> dict[str, Sizes]:
    """SP and μP over --widths; every width's config is checked before any training (ValueError)."""
    widths = [int(w) for w in args.widths.split(",")]
    if len(widths) < 2 or min(widths) < args.base or args.steps < 1 or args.seeds < 1 or args.lr <= 0:
        raise ValueError(
            f"--widths={args.widths} --base={args.base} --steps={args.steps} --seeds={args.seeds} "
            f"--lr={args.lr} is not accepted; give 2 or more widths >= --base, steps, seeds >= 1, lr > 0"
        )
    configs = {}
    for par in ("sp", "mup"):
        cfg = GPTConfig(n_layer=args.layers, n_head=args.heads, n_embd=args.base, block_size=32,
                        parametrization=par, mup_base_width=args.base)  # fmt: skip
        for w in widths:
            GPTConfig(**(cfg.to_dict() | {"n_embd": w}))
        configs[par] = cfg  # both checked before either trains: SP accepts widths μP refuses
    return {par: coord_check(cfg, widths, args.lr, args.steps, args.seeds) for par, cfg in configs.items()}


def depth_results(args: argparse.Namespace) -> dict[str, Sizes]:
    """μP and CompleteP (its base: the smallest depth) over --depths (ValueError on bad sizes)."""
    depths = sorted(int(d) for d in args.depths.split(","))
    if len(depths) < 2 or depths[0] < 1 or args.steps < 1 or args.seeds < 1 or args.lr <= 0:
        raise ValueError(
            f"--depths={args.depths} --steps={args.steps} --seeds={args.seeds} --lr={args.lr} is not "
            "accepted; give 2 or more depths >= 1, steps and seeds >= 1, lr > 0"
        )
    results = {}
    for par in ("mup", "completep"):
        base = depths[0] if par == "completep" else None
        shape = {"n_layer": depths[0], "n_head": 2, "n_embd": args.width, "block_size": 32}
        cfg = GPTConfig(**shape, parametrization=par, mup_base_width=args.width, mup_base_depth=base)
        results[par] = depth_check(cfg, depths, args.lr, args.steps, args.seeds)
    return results


def _run(
    compute: Callable[[], dict[str, Sizes]],
    out: Path,
    name: str,
    draw: Callable[[dict[str, Sizes], Path], None],
    header: tuple[str, str],
    columns: tuple[str, int, str, int],
) -> int:
    """Compute (a ValueError: one line, exit 2), write <name>.json and <name>.png, print the slopes."""
    try:
        results = compute()
    except ValueError as err:
        print(f"error: {' '.join(str(err).split())}", file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)
    draw(results, out / f"{name}.png")
    found = {par: slopes(sizes) for par, sizes in results.items()}
    (out / f"{name}.json").write_text(json.dumps({"sizes": results, "slopes": found}, indent=1) + "\n")
    first, w1, second, w2 = columns
    print(header[0])
    print(f"{header[1]:<16}{first:>{w1}}{second:>{w2}}")
    for key in found[first]:
        print(f"{key:<16}{found[first][key]:>{w1}.2f}{found[second][key]:>{w2}.2f}")
    print(f"figure: {out / f'{name}.png'}")
    return 0


def width_main(argv: list[str], usage: str) -> int:
    """scripts/coord_check.py: SP beside μP over widths."""
    args = parse_width(argv, usage)
    return _run(
        lambda: width_results(args), Path(args.out), "coord_check", width_figure,
        ("slope of log2 RMS on log2 width (0 flat, 1 ∝ width)", "probe"), ("sp", 8, "mup", 8),
    )  # fmt: skip


def depth_main(argv: list[str], usage: str) -> int:
    """scripts/depth_check.py: μP beside CompleteP over depths."""
    args = parse_depth(argv, usage)
    title = f"after {args.steps} AdamW steps, width {args.width}"
    return _run(
        lambda: depth_results(args), Path(args.out), "depth_check",
        lambda results, path: depth_figure(results, title, path),
        ("slope of log2 RMS on log2 depth (0 flat, 1 ∝ depth)", "size"), ("mup", 8, "completep", 11),
    )  # fmt: skip
