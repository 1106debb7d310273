"""data.max_bytes: the leading documents of a source up to a byte budget, the last one cut at a
character boundary."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from gptlab.data.sources.blank import is_blank

if TYPE_CHECKING:
    import datasets


def take_bytes(texts: Iterable[str | None], max_bytes: int) -> Iterator[str]:
    """Documents until max_bytes UTF-8 bytes; the last one is cut at a character boundary. Blank
    documents (sources.blank) are skipped and count nothing, a cut left blank is dropped."""
    left = max_bytes
    for text in texts:
        if is_blank(text):
            continue
        assert text is not None
        raw = text.encode("utf-8")
        if len(raw) >= left:
            cut = raw[:left].decode("utf-8", errors="ignore")
            if not is_blank(cut):
                yield cut
            return
        left -= len(raw)
        yield text


def limit_bytes(ds: datasets.Dataset, max_bytes: int) -> datasets.Dataset:
    """Keep the leading documents of `ds` that fit in max_bytes (the last one truncated)."""
    import datasets  # here, not at the top: stdlib.py (read on every run) imports take_bytes

    total, batch_size = 0, 1000
    for start in range(0, len(ds), batch_size):
        texts = ds[start : start + batch_size]["text"]
        for i, text in enumerate(texts):
            n = len((text or "").encode("utf-8"))
            if total + n >= max_bytes:
                k = start + i
                cut = list(take_bytes([text], max_bytes - total))
                head = ds.select(range(k))
                if not cut:
                    return head
                tail = datasets.Dataset.from_dict({"text": cut}, features=ds.features)
                return datasets.concatenate_datasets([head, tail])
            total += n
    return ds
