"""Reading models and runs, in rooms by the question each answers (docs/architecture.md): what a sweep
ran and how its arms compare (`sweep/`), how a ladder is fitted (`ladder/`), what a model looks like at
initialization (`init/`), μP's coordinate check (`coord_check`), a budget sweep (`budgets`), the sweep
report that puts them together (`report`, `sweep_summary`), and a config's parameter budget
(`params`, whose names are re-exported here)."""

from collections.abc import Callable
from importlib import import_module
from typing import Any


def lazy_exports(package: str, public: dict[str, str]) -> Callable[[str], Any]:
    """A package's `__getattr__` that imports a public name's module (`public[name]`, relative to
    `package`) only when the name is asked for: reading a sweep's jobs imports no matplotlib or
    scipy, and `python -m gptlab.analysis.params` does not find its module imported twice."""

    def __getattr__(name: str) -> Any:
        if name in public:
            return getattr(import_module(f"{package}.{public[name]}"), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__


__all__ = ["ParamReport", "format_report", "param_report"]
__getattr__ = lazy_exports(__name__, dict.fromkeys(__all__, "params"))
