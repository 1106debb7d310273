"""What a model looks like at initialization, on real tokens: the residual stream's variance and the
gradient norms per layer (`stats`), the report and figures scripts/init_report.py writes (`report`),
and the depth profile of gradient norms across a sweep's jobs (`grad_profile`).

The public names are below; the modules' other names serve the reports and may change."""

from typing import Any

_PUBLIC = {
    "init_report": "report",
    "grad_profiles": "stats",
    "residual_variance": "stats",
}
__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> Any:
    # lazy: the report draws with matplotlib
    if name in _PUBLIC:
        from importlib import import_module

        return getattr(import_module(f"{__name__}.{_PUBLIC[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
