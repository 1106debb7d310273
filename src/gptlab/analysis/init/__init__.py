"""What a model looks like at initialization, on real tokens: the residual stream's variance and the
gradient norms per layer (`stats`), the report and figures scripts/init_report.py writes (`report`),
and the depth profile of gradient norms across a sweep's jobs (`grad_profile`).

The public names are below; the modules' other names serve the reports and may change."""

from gptlab.analysis import lazy_exports

_PUBLIC = {
    "init_report": "report",
    "grad_profiles": "stats",
    "residual_variance": "stats",
}
__all__ = sorted(_PUBLIC)
__getattr__ = lazy_exports(__name__, _PUBLIC)
