"""Reading models and runs, never training them: a config's parameter budget (`params`), statistics
at initialization on real tokens (`init_stats`, `init_report`), a finished sweep's report (`report`) and
the figures they and the telemetry callback draw (`figures`)."""

from typing import Any

__all__ = ["ParamReport", "format_report", "param_report"]


def __getattr__(name: str) -> Any:
    # lazy, so `python -m gptlab.analysis.params` does not find its module imported twice
    if name in __all__:
        from gptlab.analysis import params

        return getattr(params, name)
    raise AttributeError(f"module 'gptlab.analysis' has no attribute {name!r}")
