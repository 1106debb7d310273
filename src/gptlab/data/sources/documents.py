"""load_documents: every data.source as a `datasets.Dataset` with one "text" column, in a fixed order.

Its own module, not the package's: `datasets` costs ~0.5 CPU s to import, and a run whose tokens are
cached never loads documents (sources/__init__ imports this module only when the name is asked for).
"""

from __future__ import annotations

import logging

import datasets

from gptlab.data.plan import SourcePlan
from gptlab.data.sources.blank import drop_blank
from gptlab.data.sources.files import load_files
from gptlab.data.sources.hub import load_hub
from gptlab.data.sources.limits import limit_bytes
from gptlab.data.sources.stdlib import stdlib_documents

log = logging.getLogger("gptlab.data.sources")


def _text_only(ds: datasets.Dataset, column: str, what: str) -> datasets.Dataset:
    if column not in ds.column_names:
        raise ValueError(
            f"data.text_column={column!r} is not a column of {what}; accepted: one of {ds.column_names}"
        )
    ds = ds.select_columns([column])
    return ds.rename_column(column, "text") if column != "text" else ds


def load_documents(src: SourcePlan) -> datasets.Dataset:
    """Load the corpus as documents in a fixed order, one per row of column "text" (pystdlib adds
    column "group": documents of one group go to the same split); blank documents are dropped
    before data.max_bytes counts (sources.blank)."""
    if src.kind == "pystdlib":
        assert src.root is not None
        ds = stdlib_documents(src.root, list(src.files), src.max_bytes)
    elif src.kind == "hub":
        ds = _text_only(load_hub(src), src.text_column, f"hub dataset {src.name or src.path}")
    else:
        ds = load_files(src.kind, src.files, src.path, src.hf_cache)
        column = "text" if src.kind == "text" else src.text_column
        ds = _text_only(ds, column, f"data.path={src.path!r}")
    if src.kind != "pystdlib":  # stdlib_documents drops its own, before its byte budget
        n_rows, ds = len(ds), drop_blank(ds)
        if n_rows and not len(ds):  # what the streaming packer says of the same files
            raise ValueError(
                f"data.source={src.kind}: the documents hold no text (0 tokens; path={src.path}); "
                "accepted: non-empty UTF-8 text"
            )
    if src.max_bytes is not None and src.kind != "pystdlib":
        ds = limit_bytes(ds, src.max_bytes)
    log.info("loaded %d documents from data.source=%s", len(ds), src.kind)
    return ds
