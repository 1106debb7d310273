"""A ladder's forecast for a rung it has not run yet: each arm's loss and the gap at N, with the
report's bootstrap-over-seeds interval (the curves of report.md's "Fitted curves", against N).
Record it before the rung runs; the held-out section of the report, once the rung is in the sweep,
sets the measurement beside it.

usage: python scripts/ladder_forecast.py <sweep dir> <N (non-embedding parameters)>
"""

from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    from pathlib import Path

    from gptlab.ablation.sweep_dir import read_record
    from gptlab.analysis import ladder
    from gptlab.analysis.arms import arrange
    from gptlab.analysis.jobs import read_sweep
    from gptlab.analysis.ladder_held_out import forecast_at
    from gptlab.analysis.ladder_report import fmt_estimate

    if argv[:1] in (["-h"], ["--help"]):
        print(__doc__.strip())
        return 0
    if len(argv) != 2:
        print(f"error: give a sweep directory and N; {__doc__.strip().splitlines()[-1]}", file=sys.stderr)
        return 2
    try:
        root, n = Path(argv[0]), float(argv[1])
        record = read_record(root)
        if record is None or not record.get("ladder_key"):
            raise ValueError(f"{root} holds no ladder sweep (no ablation.json with a ladder)")
        if not n > 0:
            raise ValueError(f"N={argv[1]} is not accepted; give the rung's non-embedding parameters, > 0")
        res = ladder.analyse(arrange(read_sweep(root), record, "init"), record)
        if res.note:
            raise ValueError(f"no forecast: {res.note}")
    except ValueError as err:
        print(f"error: {' '.join(str(err).split())}", file=sys.stderr)
        return 2
    print(f"forecast at N={n:,.0f} from rungs {', '.join(res.used)} of {root}")
    for f in forecast_at(res, n):
        print(f"{f.what:<20} {fmt_estimate(f.forecast):<40} {f.kind}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
