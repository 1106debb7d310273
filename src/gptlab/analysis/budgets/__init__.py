"""A sweep over token budgets (hydra.sweeper.budgets): per arm the loss at each budget, the gap and
its verdict per budget and the compute the branches saved (`report`), and per arm the data law
L(D) = E + B·D^(−β) with the ladder's fit and bootstrap (`fit`). A ladder crossed with budgets gives
each arm's loss surface over sizes × budgets and its compute-optimal size for a FLOP budget by
Hoffmann et al. 2022's Approaches 1 (`envelope`) and 3 (`surface_fit`), read by `surface_data` and
written by `surface` (also `python -m gptlab.analysis.budgets.surface <sweep dir>`).

The public names are below; the modules' other names serve the report and may change."""

from gptlab.analysis import lazy_exports

_PUBLIC = {
    "budget_cells": "report",
    "budget_section": "report",
    "fit_budgets": "fit",
    "fit_surface": "surface_fit",
    "read_grid": "surface_data",
    "surface_section": "surface",
}
__all__ = sorted(_PUBLIC)
__getattr__ = lazy_exports(__name__, _PUBLIC)
