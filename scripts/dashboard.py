"""Build the wandb workspace view of a sweep or run dir; write it there, save it to wandb if online.

usage: python scripts/dashboard.py <sweep or run dir> [entity=<e>] [project=<p>] [allow_failed=true]
       [save=auto|true|false]
Writes <dir>/wandb_view.json (wandb-workspaces' own view model). Offline it prints one line naming
the file and the command that uploads the runs and saves the view; online it prints the view's URL.
"""

import sys

from gptlab.heap import imports_unscanned

with imports_unscanned():  # torch's objects: never walked by the collector again
    from gptlab.dashboards.cli import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], usage=__doc__ or ""))
