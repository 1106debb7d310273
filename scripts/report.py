"""Write report.md (tables, CIs, verdicts, PNG figures) for a sweep directory; no network needed.

usage: python scripts/report.py <sweep dir> [out=<dir>] [figures=false] [wandb=true] [baseline=<arm>]
       [lr_sensitivity=init|wortsman]
(wandb=true also logs the figures to the sweep's summary run, offline unless logger.mode=online;
baseline=<arm> compares every arm with that one instead of the sweep's baseline;
lr_sensitivity=wortsman counts a diverged run at min(final loss, loss at init), the paper's
definition, instead of the default's loss at init)
"""

from __future__ import annotations

import logging
import sys

OPTIONS = {"out": None, "figures": "true", "wandb": "false", "baseline": None, "lr_sensitivity": "init"}


def main(argv: list[str] | None = None) -> int:
    """Parse `<sweep dir> [key=value ...]`, write the report, print its path; errors exit 2."""
    from gptlab.analysis.sweep_summary import report_from_cli

    args = sys.argv[1:] if argv is None else argv
    if not args or any(a in ("-h", "--help") for a in args):
        print(__doc__.strip())
        return 0 if args else 2
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(message)s")
    try:
        options = dict(OPTIONS)
        for arg in args[1:]:
            key, sep, value = arg.partition("=")
            if not sep or key not in OPTIONS:
                raise ValueError(f"argument {arg!r} is not accepted; {' '.join(__doc__.splitlines()[2:4])}")
            options[key] = value
        print(report_from_cli(args[0], **options))
    except (ValueError, FileNotFoundError) as err:
        print(f"error: {' '.join(str(err).split())}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
