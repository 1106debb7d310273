"""Local text, JSON and parquet files read through `datasets`' builders, checked first so a bad file
fails naming itself instead of deep inside a builder."""

from __future__ import annotations

import codecs
from collections.abc import Iterable
from pathlib import Path

import datasets

# Builders `datasets` ships for local files, keyed by file suffix (hub sets given as local copies).
_BUILDER_BY_SUFFIX = {
    ".txt": "text",
    ".text": "text",
    ".md": "text",
    ".json": "json",
    ".jsonl": "json",
    ".parquet": "parquet",
    ".csv": "csv",
    ".arrow": "arrow",
}
_SCAN_CHUNK = 1 << 20


def check_utf8(files: Iterable[Path]) -> None:
    """Fail early, naming the file, on binary (NUL bytes) or non-UTF-8 input instead of mid-load."""
    for f in files:
        decoder = codecs.getincrementaldecoder("utf-8")()
        offset = 0
        with open(f, "rb") as fh:
            while chunk := fh.read(_SCAN_CHUNK):
                nul = chunk.find(b"\x00")
                if nul >= 0:
                    raise ValueError(
                        f"data.path: {f} looks binary (NUL byte at offset {offset + nul}); "
                        "accepted: UTF-8 text files"
                    )
                try:
                    decoder.decode(chunk)
                except UnicodeDecodeError as e:
                    raise ValueError(
                        f"data.path: {f} is not UTF-8 (byte offset ~{offset + e.start}: "
                        f"{e.reason}); "
                        "accepted: UTF-8 text files"
                    ) from None
                offset += len(chunk)
            try:
                decoder.decode(b"", final=True)
            except UnicodeDecodeError as e:
                raise ValueError(
                    f"data.path: {f} is not UTF-8 (truncated sequence at end: {e.reason}); "
                    "accepted: UTF-8 text files"
                ) from None


def _check_parquet(files: Iterable[Path]) -> None:
    import pyarrow.parquet as pq

    for f in files:
        try:
            pq.read_metadata(f)
        except Exception as e:  # pyarrow raises ArrowInvalid/OSError variants for junk files
            raise ValueError(f"data.path: {f} is not a readable parquet file ({e})") from None


def builder_for(files: list[Path] | tuple[Path, ...], what: str) -> str:
    """The `datasets` builder that reads these files, from their suffixes (one format for all)."""
    builders = {_BUILDER_BY_SUFFIX.get(f.suffix.lower()) for f in files}
    if None in builders or len(builders) != 1:
        suffixes = sorted({f.suffix for f in files})
        raise ValueError(
            f"{what}: cannot tell the file format from suffixes {suffixes}; "
            f"accepted: one of {sorted(_BUILDER_BY_SUFFIX)}"
        )
    return builders.pop()  # type: ignore[return-value]


def load_files(
    builder: str, files: tuple[Path, ...], path_setting: str | None, hf_cache: Path
) -> datasets.Dataset:
    """The files as one Dataset (text files: one document each), `datasets`' cache under hf_cache."""
    if builder in ("text", "json"):
        check_utf8(files)
    elif builder == "parquet":
        _check_parquet(files)
    kwargs = {"sample_by": "document"} if builder == "text" else {}
    try:
        ds = datasets.load_dataset(
            builder,
            data_files=[str(f) for f in files],
            split="train",
            cache_dir=str(hf_cache),
            **kwargs,
        )
    except datasets.exceptions.DatasetGenerationError as e:
        cause = e.__cause__ or e
        raise ValueError(
            f"data.path={path_setting!r}: could not read the {builder} files "
            f"({type(cause).__name__}: {cause})"
        ) from e
    return ds
