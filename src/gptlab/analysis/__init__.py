"""Reading models and runs, in rooms by the question each answers (docs/architecture.md): what a sweep
ran and how its arms compare (`sweep/`), how a ladder is fitted (`ladder/`), what a model looks like at
initialization (`init/`), μP's coordinate check (`coord_check`), a budget sweep (`budgets`), the sweep
report that puts them together (`report`, `sweep_summary`), and a config's parameter budget
(`params`, whose names are re-exported here)."""

from typing import Any

__all__ = ["ParamReport", "format_report", "param_report"]


def __getattr__(name: str) -> Any:
    # lazy, so `python -m gptlab.analysis.params` does not find its module imported twice
    if name in __all__:
        from gptlab.analysis import params

        return getattr(params, name)
    raise AttributeError(f"module 'gptlab.analysis' has no attribute {name!r}")
