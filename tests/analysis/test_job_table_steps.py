"""The report's jobs table counts steps done for a job without metrics.json's `steps`, as status.py
does (issue 37, item 1): Lightning's CSV `step` is 0-based, so rows at steps 0..11 are 12 steps."""

from __future__ import annotations

from gptlab.analysis.sweep.jobs import Job
from gptlab.analysis.sweep.tables import job_table, parse_table


def test_a_job_known_only_from_its_csv_shows_steps_done() -> None:
    logged = Job("0", None, ["seed=1"], log={"train/loss": [(s, 3.0 - 0.1 * s) for s in range(12)]})
    counted = Job("1", None, ["seed=2"], metrics={"steps": 7}, log={"train/loss": [(0, 3.0)]})
    (a, b) = parse_table("## Jobs\n\n" + job_table([logged, counted], ["seed"]))
    assert a["steps"] == "12 (csv)"  # 12 rows written, one per step 0..11
    assert b["steps"] == "7"  # metrics.json's own count comes first
