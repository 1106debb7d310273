"""How a ladder is fitted: each arm's best-LR loss per rung (`analyse`), a power law L(N) per arm and
the gap extrapolated past the largest rung (`fit`, `powerlaw`), rungs held out and forecast
(`held_out`), the report's words and figure (`report`), the shapes they share (`records`), the LR
transfer across widths (`lr_transfer`) and the command lines (`cli`).

The public names are below; the modules' other names serve the ladder report and may change."""

from gptlab.analysis import lazy_exports

_PUBLIC = {
    "LadderError": "records",
    "LadderResult": "records",
    "fit_curves": "fit",
    "forecast_at": "held_out",
    "ladder_figure": "report",
}
__all__ = sorted(_PUBLIC)
__getattr__ = lazy_exports(__name__, _PUBLIC)
