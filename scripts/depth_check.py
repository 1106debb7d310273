"""CompleteP's coordinate check in depth: the residual stream's change after a few Adam steps against
depth, μP (no depth rule) beside CompleteP (Dey et al. 2025; gptlab.training.coord_check.depth_check).

usage: python scripts/depth_check.py [--depths 2,4,8,16] [--width 64] [--steps 3] [--lr 0.01]
                                     [--seeds 2] [--out DIR]
The smallest depth is CompleteP's base. Prints each size's slope of log2 RMS on log2 depth (0: flat,
1: ∝ depth) and writes DIR/depth_check.png and DIR/depth_check.json (default DIR:
outputs/depth_check). Bad input: one line, exit 2.
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
from gptlab.training.coord_check import depth_check, slopes  # noqa: E402


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(usage=__doc__)
    p.add_argument("--depths", default="2,4,8,16")
    p.add_argument("--width", type=int, default=64)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--lr", type=float, default=1e-2)
    p.add_argument("--seeds", type=int, default=2)
    p.add_argument("--out", default="outputs/depth_check")
    return p.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse(argv)
    try:
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
    except ValueError as err:
        print(f"error: {' '.join(str(err).split())}", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    found = {par: slopes(sizes) for par, sizes in results.items()}
    (out / "depth_check.json").write_text(json.dumps({"sizes": results, "slopes": found}, indent=1) + "\n")
    fig, ax = plt.subplots(figsize=(5.5, 4))
    for par, sizes in results.items():
        ax.plot(depths, [sizes[d]["stream update"] for d in depths], marker="o", label=par)
    ax.set(xscale="log", yscale="log", xlabel="depth (n_layer)", ylabel="RMS of the stream's change")
    ax.set_xticks(depths, [str(d) for d in depths])
    ax.set_title(f"after {args.steps} AdamW steps, width {args.width}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "depth_check.png", dpi=110)
    plt.close(fig)
    print("slope of log2 RMS on log2 depth (0 flat, 1 ∝ depth)")
    print(f"{'size':<16}{'mup':>8}{'completep':>11}")
    for key in found["mup"]:
        print(f"{key:<16}{found['mup'][key]:>8.2f}{found['completep'][key]:>11.2f}")
    print(f"figure: {out / 'depth_check.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
