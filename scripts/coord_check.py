"""μP's coordinate check: activation RMS against width after a few Adam steps, SP beside μP.

usage: python scripts/coord_check.py [--widths 64,128,256,512,1024] [--base 64] [--steps 4]
                                     [--lr 0.01] [--seeds 2] [--layers 2] [--heads 4] [--out DIR]
Prints each probe's slope of log2 RMS on log2 width (0: flat, 1: ∝ width) and writes
DIR/coord_check.png and DIR/coord_check.json (default DIR: outputs/coord_check). Bad input: one line,
exit 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from gptlab.model import GPTConfig  # noqa: E402
from gptlab.training.coord_check import coord_check, slopes  # noqa: E402


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(usage=__doc__)
    p.add_argument("--widths", default="64,128,256,512,1024")
    p.add_argument("--base", type=int, default=64)
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--lr", type=float, default=1e-2)
    p.add_argument("--seeds", type=int, default=2)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--out", default="outputs/coord_check")
    return p.parse_args(argv)


def figure(results: dict[str, dict[int, dict[str, float]]], path: Path) -> None:
    """One panel per parametrization: each probe's RMS against width, log-log (the paper's figure 5)."""
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


def main(argv: list[str]) -> int:
    args = parse(argv)
    try:
        widths = [int(w) for w in args.widths.split(",")]
        if len(widths) < 2 or min(widths) < args.base or args.steps < 1 or args.seeds < 1 or args.lr <= 0:
            raise ValueError(
                f"--widths={args.widths} --base={args.base} --steps={args.steps} --seeds={args.seeds} "
                f"--lr={args.lr} is not accepted; give 2 or more widths >= --base, steps, seeds >= 1, lr > 0"
            )
        results = {}
        for par in ("sp", "mup"):
            cfg = GPTConfig(n_layer=args.layers, n_head=args.heads, n_embd=args.base, block_size=32,
                            parametrization=par, mup_base_width=args.base)  # fmt: skip
            for w in widths:  # every width's config is checked before any training
                GPTConfig(**(cfg.to_dict() | {"n_embd": w}))
            results[par] = coord_check(cfg, widths, args.lr, args.steps, args.seeds)
    except ValueError as err:
        print(f"error: {' '.join(str(err).split())}", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    figure(results, out / "coord_check.png")
    found = {par: slopes(sizes) for par, sizes in results.items()}
    (out / "coord_check.json").write_text(json.dumps({"sizes": results, "slopes": found}, indent=1) + "\n")
    print("slope of log2 RMS on log2 width (0 flat, 1 ∝ width)")
    print(f"{'probe':<16}{'sp':>8}{'mup':>8}")
    for probe in found["sp"]:
        print(f"{probe:<16}{found['sp'][probe]:>8.2f}{found['mup'][probe]:>8.2f}")
    print(f"figure: {out / 'coord_check.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
