"""Build the wandb workspace view of a sweep or run dir; write it there, save it to wandb if online.

usage: python scripts/dashboard.py <sweep or run dir> [entity=<e>] [project=<p>] [allow_failed=true]
       [save=auto|true|false]
Writes <dir>/wandb_view.json (wandb-workspaces' own view model). Offline it prints one line naming
the file and the command that uploads the runs and saves the view; online it prints the view's URL.
"""

from __future__ import annotations

import logging
import sys


def main(argv: list[str] | None = None) -> int:
    from gptlab.dashboards.cli import build
    from gptlab.dashboards.keys import ConfigUnreadable
    from gptlab.dashboards.source import NotBuildable

    args = sys.argv[1:] if argv is None else argv
    if not args or any(a in ("-h", "--help") for a in args):
        print(__doc__.strip())
        return 0 if args else 2
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(message)s")
    try:
        options = {}
        for arg in args[1:]:
            key, sep, value = arg.partition("=")
            if not sep:
                raise NotBuildable(
                    f"argument {arg!r} is not accepted; give key=value (entity=, project=, ...)"
                )
            options[key] = value
        _, line = build(args[0], **options)
    except (NotBuildable, ConfigUnreadable) as err:
        print(f"error: {' '.join(str(err).split())}", file=sys.stderr)
        return 2
    print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
