"""A ladder's forecast for a rung it has not run yet: each arm's loss and the gap at N, with the
report's bootstrap-over-seeds interval (the curves of report.md's "Fitted curves", against N).
Record it before the rung runs; the held-out section of the report, once the rung is in the sweep,
sets the measurement beside it.

usage: python scripts/ladder_forecast.py <sweep dir> <N (non-embedding parameters)>
"""

import sys

from gptlab.analysis.ladder.cli import forecast_main

if __name__ == "__main__":
    sys.exit(forecast_main(sys.argv[1:], doc=__doc__ or ""))
