"""Start-up imports whose objects the garbage collector never scans again (`gc.freeze`).

torch, Lightning and what they import leave ~490,000 objects that live as long as the process. Each
of CPython's full collections walks all of them: seven ran while train.py imported them and one while
Hydra composed the config, ~1 CPU s of a short run on 2 shared cores (docs/performance.md, "Short
runs"), finding ~13,000 objects of garbage among them. Inside `imports_unscanned` the collector
is paused; at its end the objects alive are moved to the permanent generation (the pattern the
`gc.freeze` documentation gives for pre-fork servers), so later collections walk what the run itself
allocates. Nothing a run computes changes; the garbage left by the imports is kept (~13,000
objects, a few MB). A block that imported nothing (a sweep's second job in the same process) freezes
nothing: what an earlier job left behind stays collectable.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def imports_unscanned() -> Iterator[None]:
    """Pause the collector while the block imports; freeze what is alive after it if it imported."""
    enabled = gc.isenabled()
    before = len(sys.modules)
    gc.disable()
    try:
        yield
    finally:
        if len(sys.modules) > before:
            gc.freeze()
        if enabled:
            gc.enable()
