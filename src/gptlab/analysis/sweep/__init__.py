"""What a sweep ran and how its arms compare: its jobs read from disk (`jobs`), grouped into arms and
cells with intervals and verdicts (`arms`), the tables and figures of its report (`tables`, `figures`),
the downstream-task section (`task_report`), the attention-sink table (`attention`), a running
sweep's progress (`status`) and, under model/ffn=moe, each arm's expert load (`moe_load`).

The public names are below; the modules' other names serve the report and may change."""

from gptlab.analysis import lazy_exports

_PUBLIC = {
    "Job": "jobs",
    "read_sweep": "jobs",
    "read_job": "jobs",
    "arrange": "arms",
    "parse_table": "tables",
    "read_status": "status",
}
__all__ = sorted(_PUBLIC)
__getattr__ = lazy_exports(__name__, _PUBLIC)
