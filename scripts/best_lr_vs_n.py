"""Does one LR grid hold across a ladder? Each arm's best LR at every rung of one or more ladder
sweeps (e.g. ladder_ffn under SP and ladder_ffn_mup under μP), its drift in grid steps, the slope of
log best LR on log N, and the verdict (gptlab.analysis.lr_transfer); --out draws them on one figure.

usage: python scripts/best_lr_vs_n.py <ladder sweep dir> [<ladder sweep dir> ...] [--out FIG.png]
"""

from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    import argparse
    from pathlib import Path

    from gptlab.ablation.sweep_dir import read_record
    from gptlab.analysis import figures, ladder, lr_transfer
    from gptlab.analysis.arms import arrange
    from gptlab.analysis.jobs import read_sweep

    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("sweeps", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    series = []
    try:
        for root in args.sweeps:
            record = read_record(root)
            if record is None or not record.get("ladder_key"):
                raise ValueError(f"{root} holds no ladder sweep (no ablation.json with a ladder)")
            res = ladder.analyse(arrange(read_sweep(root), record, "init"), record)
            series.append((root, lr_transfer.transfer(res, record)))
    except ValueError as err:
        print(f"error: {' '.join(str(err).split())}", file=sys.stderr)
        return 2
    for root, arms in series:
        for a in arms:
            print(f"{root} | {a.arm} | {a.parametrization} | grid step ×{a.step:.2f} | {a.verdict}")
            for r in a.rungs:
                where = f"point {r.index + 1} of {r.points}" if r.index is not None else "no result"
                lr = f"{r.lr:.3g}" if r.lr is not None else "-"
                n = f"{r.n:,.0f}" if r.n else "-"
                print(f"  {r.rung:>6}  N={n:>11}  best LR {lr:>8}  ({where}{', edge' if r.at_edge else ''})")
    if args.out is not None:
        figures.best_lr_vs_n([a for _, arms in series for a in arms], args.out)
        print(f"figure: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
