"""The qk-norm sweep's table (scripts/plot_qk_norm_sweep.py) on hand-written jobs: a job whose
metrics.json has no train loss (null: a run shorter than its log interval) reads "—" instead of
crashing the script with a format error, and the other numbers are the ones written."""

from __future__ import annotations

from gptlab.analysis.qk_norm_sweep import QKJob, table


def test_table_reads_a_missing_train_loss_as_a_dash() -> None:
    jobs = [
        QKJob(0.1, "off", [1, 2], [29.0, 12.5], [], [], {"final_train_loss": None, "final_val_loss": 2.5}),
        QKJob(0.1, "on", [1], [7.25], [1], [2.0], {"final_train_loss": 1.9876, "final_val_loss": 2.1234}),
    ]
    rows = table(jobs).splitlines()[2:]
    assert rows[0] == "| 0.1 | off | 29.0 | 12.5 | — | 2.500 | None | None |"
    assert rows[1] == "| 0.1 | on | 7.2 | 7.2 | 1.988 | 2.123 | None | None |"
