"""Analyses of a configured model that need no training: parameter budget, init statistics."""

from typing import Any

__all__ = ["ParamReport", "format_report", "param_report"]


def __getattr__(name: str) -> Any:
    # lazy, so `python -m gptlab.analysis.params` does not find its module imported twice
    if name in __all__:
        from gptlab.analysis import params

        return getattr(params, name)
    raise AttributeError(f"module 'gptlab.analysis' has no attribute {name!r}")
