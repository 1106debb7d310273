"""A sweep over token budgets (hydra.sweeper.budgets): per arm the loss at each budget, the gap and
its verdict per budget and the compute the branches saved (`report`), and per arm the data law
L(D) = E + B·D^(−β) with the ladder's fit and bootstrap (`fit`).

The public names are below; the modules' other names serve the report and may change."""

from gptlab.analysis import lazy_exports

_PUBLIC = {
    "budget_cells": "report",
    "budget_section": "report",
    "fit_budgets": "fit",
}
__all__ = sorted(_PUBLIC)
__getattr__ = lazy_exports(__name__, _PUBLIC)
