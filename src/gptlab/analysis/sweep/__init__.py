"""What a sweep ran and how its arms compare: its jobs read from disk (`jobs`), grouped into arms and
cells with intervals and verdicts (`arms`), the tables and figures of its report (`tables`, `figures`),
the downstream-task section (`task_report`) and a running sweep's progress (`status`).

The public names are below; the modules' other names serve the report and may change."""

from typing import Any

_PUBLIC = {
    "Job": "jobs",
    "read_sweep": "jobs",
    "read_job": "jobs",
    "arrange": "arms",
    "parse_table": "tables",
    "read_status": "status",
}
__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> Any:
    # lazy: reading a sweep's jobs should not import matplotlib or scipy
    if name in _PUBLIC:
        from importlib import import_module

        return getattr(import_module(f"{__name__}.{_PUBLIC[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
