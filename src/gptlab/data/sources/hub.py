"""data.source=hub: a Hugging Face dataset, from the hub or from a downloaded copy (data.path)."""

from __future__ import annotations

from collections.abc import Iterator

import datasets

from gptlab.data.plan import SourcePlan
from gptlab.data.sources.files import builder_for, load_files
from gptlab.data.sources.limits import take_bytes


def connection_errors() -> tuple[type[BaseException], ...]:
    """The exceptions that mean "the hub cannot be reached" across huggingface_hub, requests, httpx."""
    errors: list[type[BaseException]] = [ConnectionError, TimeoutError]
    try:
        from huggingface_hub.errors import LocalEntryNotFoundError, OfflineModeIsEnabled

        errors += [LocalEntryNotFoundError, OfflineModeIsEnabled]
    except ImportError:
        pass
    for mod, name in (("requests", "ConnectionError"), ("httpx", "TransportError")):
        try:
            errors.append(getattr(__import__(mod), name))
        except (ImportError, AttributeError):
            pass
    return tuple(errors)


def hub_unreachable(name: str | None, err: BaseException) -> ConnectionError:
    """The one line a user sees when the hub is unreachable: what to use instead."""
    return ConnectionError(
        f"data.source=hub: the Hugging Face hub is unreachable for {name!r} "
        f"({type(err).__name__}); use a local copy instead, e.g. "
        "data.path=/path/to/TinyStories/*.txt data.source=text "
        "(or keep data.source=hub and set data.path to the downloaded dataset directory)"
    )


def load_hub(src: SourcePlan) -> datasets.Dataset:
    """The hub set's split (only data.max_bytes of it, streamed, when that is set), or its local copy."""
    if src.path:
        return _load_hub_local(src)
    try:
        if src.max_bytes is not None:
            # streaming reads only what max_bytes keeps instead of downloading the whole set
            stream = datasets.load_dataset(src.name, src.subset, split=src.split, streaming=True)
            texts = take_bytes((row[src.text_column] for row in stream), src.max_bytes)
            return datasets.Dataset.from_dict({src.text_column: list(texts)})
        ds = datasets.load_dataset(src.name, src.subset, split=src.split)
    except connection_errors() as e:
        raise hub_unreachable(src.name, e) from e
    except KeyError as e:
        raise ValueError(f"data.text_column={src.text_column!r} is not a column of {src.name}") from e
    return ds


def _load_hub_local(src: SourcePlan) -> datasets.Dataset:
    if src.root is not None:  # a downloaded dataset directory
        ds = datasets.load_dataset(str(src.root), src.subset, split=src.split, cache_dir=str(src.hf_cache))
        assert isinstance(ds, datasets.Dataset)
        return ds
    return load_files(builder_for(src.files, f"data.path={src.path!r}"), src.files, src.path, src.hf_cache)


def streaming_dataset(src: SourcePlan) -> datasets.IterableDataset:
    """datasets' streaming mode over the hub set, or over the local files in data.path."""
    if src.root is not None:
        return datasets.load_dataset(str(src.root), src.subset, split=src.split, streaming=True)
    if src.path:
        builder = builder_for(src.files, f"data.path={src.path!r}")
        return datasets.load_dataset(
            builder, data_files=[str(f) for f in src.files], split="train", streaming=True
        )
    return datasets.load_dataset(src.name, src.subset, split=src.split, streaming=True)


def hub_texts(src: SourcePlan) -> Iterator[list[str | None]]:
    """The text column of a streamed dataset, a batch of rows at a time, as the rows arrive."""
    try:
        stream = streaming_dataset(src)
        for batch in stream.iter(batch_size=256):
            if src.text_column not in batch:
                raise ValueError(
                    f"data.text_column={src.text_column!r} is not a column of "
                    f"{src.name or src.path}; accepted: one of {sorted(batch)}"
                )
            yield batch[src.text_column]
    except connection_errors() as e:
        raise hub_unreachable(src.name, e) from e
