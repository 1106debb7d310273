"""Start-up imports whose objects the garbage collector never scans again (`gc.freeze`).

torch, Lightning and what they import leave ~490,000 objects that live as long as the process. Each
of CPython's full collections walks all of them: in a 20-step train.py run eight walked 56,000 to
488,000 objects while it imported and composed, 1.3 CPU s, and the younger collections 0.4 s more;
0.12 s of collector time in all after this (gc.callbacks, docs/performance.md "Short runs"). Only
~13,000 of those objects were garbage. Inside `imports_unscanned` the collector is paused; at its
end the objects alive move to the permanent generation (the pattern the `gc.freeze` documentation
gives for pre-fork servers), so later collections walk what the run itself allocates. Nothing a run
computes changes (its metrics.json is the same to the bit); the garbage the imports left is kept
(~13,000 objects). A block that imported nothing (a sweep's second job in the same process) freezes
nothing: what an earlier job left behind stays collectable. train.py, evaluate.py, generate.py and
the scripts import inside it; a script that imports torch inside its `main` wraps that import
(planning/cli.py).
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
