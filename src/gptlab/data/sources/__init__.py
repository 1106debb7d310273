"""Document sources, the first stage: every data.source becomes a `datasets.Dataset` with one "text"
column (load_documents, in sources.documents), or, for the streaming packer, a stream of UTF-8 pieces
(sources.stream).

The stages take a resolved SourcePlan (data.plan): the files are already matched, nothing here reads
the data config or resolves a path. One module per kind: stdlib, files (text/json/parquet), hub.
Importing the package imports no `datasets` (~0.5 CPU s): data.resolve reads the stdlib's file list
on every run, and a run on cached tokens loads no documents; `load_documents` is imported when asked for.
"""

from __future__ import annotations

from typing import Any

from gptlab.data.sources.stdlib import STDLIB_EXCLUDED_DIRS, stdlib_files

__all__ = ["STDLIB_EXCLUDED_DIRS", "load_documents", "stdlib_files"]


def __getattr__(name: str) -> Any:
    if name == "load_documents":
        from gptlab.data.sources.documents import load_documents

        return load_documents
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
