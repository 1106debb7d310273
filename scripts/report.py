"""Write report.md (a table per job and PNG figures) for a sweep directory; no wandb, no network.

usage: python scripts/report.py multirun/<sweep dir> [out=<dir>] [figures=false]
"""

from __future__ import annotations

import logging
import sys

from gptlab.analysis.report import write_report

USAGE = "usage: python scripts/report.py <sweep dir> [out=<dir>] [figures=true|false]"


def main(argv: list[str] | None = None) -> int:
    """Parse `<sweep dir> [key=value ...]`, write the report, print its path; errors exit 2."""
    args = sys.argv[1:] if argv is None else argv
    if not args or any(a in ("-h", "--help") for a in args):
        print(__doc__.strip())
        return 0 if args else 2
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(message)s")
    sweep, options = args[0], {}
    try:
        for arg in args[1:]:
            key, sep, value = arg.partition("=")
            if not sep or key not in ("out", "figures"):
                raise ValueError(f"argument {arg!r} is not accepted; {USAGE}")
            options[key] = value
        figures = options.get("figures", "true").lower()
        if figures not in ("true", "false"):
            raise ValueError(f"figures={figures!r} is not accepted; choose true or false")
        path = write_report(sweep, out=options.get("out"), figures=figures == "true")
    except (ValueError, FileNotFoundError) as err:
        print(f"error: {' '.join(str(err).split())}", file=sys.stderr)
        return 2
    print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
