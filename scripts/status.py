"""Print a sweep's job table (state, step of max, last val loss) and its counts and ETA.

usage: python scripts/status.py <sweep dir>
Reads only files (progress.json, each job's metrics.json and CSV log): run it from any shell while
the sweep runs, also on a SLURM login node. A job stopped by SIGTERM (the sweep's Ctrl-C), or whose
sweep was killed, shows as interrupted; `step` is the steps it has done.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """Print the table and the summary line; a directory that is no sweep: one line, exit 2."""
    from gptlab.analysis.sweep.status import NotASweep, read_status, table

    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0] in ("-h", "--help"):
        print(__doc__.strip(), file=sys.stdout if args else sys.stderr)
        return 0 if args and args[0] in ("-h", "--help") else 2
    try:
        rows, line = read_status(args[0])
    except NotASweep as err:
        print(f"error: {' '.join(str(err).split())}", file=sys.stderr)
        return 2
    print(table(rows))
    print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
