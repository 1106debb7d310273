"""scripts/best_lr_vs_n.py and scripts/ladder_forecast.py: read a ladder sweep, analyse it as the
report does, print one arm a block (best LR per rung) or one forecast a line.

Each script passes its docstring as `doc`, so its usage stays where a user reads it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from gptlab.ablation.sweep_dir import read_record
from gptlab.analysis.ladder import analyse as ladder
from gptlab.analysis.ladder import lr_transfer
from gptlab.analysis.ladder.held_out import forecast_at
from gptlab.analysis.ladder.records import LadderResult
from gptlab.analysis.ladder.report import fmt_estimate
from gptlab.analysis.sweep.arms import arrange
from gptlab.analysis.sweep.jobs import read_sweep


def _refused(err: ValueError) -> int:
    print(f"error: {' '.join(str(err).split())}", file=sys.stderr)
    return 2


def ladder_record(root: Path) -> dict[str, Any]:
    """The sweep's record (ablation.json); ValueError when `root` holds no ladder sweep."""
    record = read_record(root)
    if record is None or not record.get("ladder_key"):
        raise ValueError(f"{root} holds no ladder sweep (no ablation.json with a ladder)")
    return record


def analysed(root: Path, record: dict[str, Any]) -> LadderResult:
    """The ladder analysis as the report makes it (a diverged run counted at its loss at init)."""
    return ladder.analyse(arrange(read_sweep(root), record, "init"), record)


def best_lr_main(argv: list[str], doc: str) -> int:
    """scripts/best_lr_vs_n.py: each arm's best LR per rung of every sweep; --out draws them."""
    parser = argparse.ArgumentParser(description=doc.strip().splitlines()[0])
    parser.add_argument("sweeps", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    series = []
    try:
        for root in args.sweeps:
            record = ladder_record(root)
            series.append((root, lr_transfer.transfer(analysed(root, record), record)))
    except ValueError as err:
        return _refused(err)
    for root, arms in series:
        for a in arms:
            print(f"{root} | {a.arm} | {a.parametrization} | grid step ×{a.step:.2f} | {a.verdict}")
            for r in a.rungs:
                where = f"point {r.index + 1} of {r.points}" if r.index is not None else "no result"
                lr = f"{r.lr:.3g}" if r.lr is not None else "-"
                n = f"{r.n:,.0f}" if r.n else "-"
                print(f"  {r.rung:>6}  N={n:>11}  best LR {lr:>8}  ({where}{', edge' if r.at_edge else ''})")
    if args.out is not None:
        from gptlab import figures  # matplotlib: only when a figure is asked for

        figures.best_lr_vs_n([a for _, arms in series for a in arms], args.out)
        print(f"figure: {args.out}")
    return 0


def forecast_main(argv: list[str], doc: str) -> int:
    """scripts/ladder_forecast.py <sweep dir> <N>: each arm's loss and the gap forecast at N."""
    if argv[:1] in (["-h"], ["--help"]):
        print(doc.strip())
        return 0
    if len(argv) != 2:
        print(f"error: give a sweep directory and N; {doc.strip().splitlines()[-1]}", file=sys.stderr)
        return 2
    try:
        root, n = Path(argv[0]), float(argv[1])
        record = ladder_record(root)
        if not n > 0:
            raise ValueError(f"N={argv[1]} is not accepted; give the rung's non-embedding parameters, > 0")
        res = analysed(root, record)
        if res.note:
            raise ValueError(f"no forecast: {res.note}")
    except ValueError as err:
        return _refused(err)
    print(f"forecast at N={n:,.0f} from rungs {', '.join(res.used)} of {root}")
    for f in forecast_at(res, n):
        print(f"{f.what:<20} {fmt_estimate(f.forecast):<40} {f.kind}")
    return 0
