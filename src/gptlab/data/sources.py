"""Document sources: every `data.source` becomes a `datasets.Dataset` with one "text" column."""

from __future__ import annotations

import codecs
import glob
import hashlib
import json
import logging
import os
import re
import sys
import sysconfig
from collections.abc import Iterable, Iterator
from pathlib import Path

import datasets

from gptlab.data.config import SOURCES, DataConfig

log = logging.getLogger(__name__)

# Parts of the stdlib that are not representative library code (tests, GUI, vendored wheels).
STDLIB_EXCLUDED_DIRS = frozenset(
    {"site-packages", "test", "tests", "idlelib", "tkinter", "lib2to3", "ensurepip", "__pycache__"}
)
# Names the stdlib's train/val rule (split by stdlib_family): change it when the rule changes, so
# token caches packed under the old rule (every 20th file, families straddling) are not reused.
STDLIB_SPLIT = "family-v1"
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


def original_cwd() -> Path:
    """The directory the user launched from, also when Hydra has changed into a run directory."""
    try:
        from hydra.core.hydra_config import HydraConfig
        from hydra.utils import get_original_cwd

        if HydraConfig.initialized():
            return Path(get_original_cwd())
    except ImportError:  # hydra is a dependency, but the data pipeline does not need it
        pass
    return Path.cwd()


def resolve_path(path: str | os.PathLike[str]) -> Path:
    """Absolute path: `~` expanded, relative paths taken against the original working directory."""
    p = Path(path).expanduser()
    return p if p.is_absolute() else original_cwd() / p


def stable_hash(parts: object) -> str:
    """Short sha256 of a JSON-able value: names cache entries."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _check_source(cfg: DataConfig) -> None:
    if cfg.source not in SOURCES:
        raise ValueError(f"data.source={cfg.source!r} is not accepted; choose one of {SOURCES}")
    if cfg.max_bytes is not None and cfg.max_bytes <= 0:
        raise ValueError(f"data.max_bytes={cfg.max_bytes!r} must be a positive integer or null")
    if cfg.source in ("text", "json", "parquet") and not cfg.path:
        raise ValueError(f"data.path is required for data.source={cfg.source} (a file, dir or glob)")
    if cfg.doc_separator is not None and cfg.source != "text":
        raise ValueError(
            f"data.doc_separator applies to data.source=text, not {cfg.source}; "
            "accepted: null, or data.source=text"
        )
    if cfg.streaming and cfg.source != "hub":
        raise ValueError(
            f"data.streaming=true applies to data.source=hub, not {cfg.source}; a text file streams "
            "with data.doc_separator"
        )
    if cfg.source == "hub" and not (cfg.name or cfg.path):
        raise ValueError("data.name is required for data.source=hub (e.g. roneneldan/TinyStories)")


# ---------------------------------------------------------------- pystdlib


def stdlib_files() -> tuple[Path, list[Path]]:
    """The stdlib root and its `.py` files (sorted relative paths), excluded dirs pruned."""
    root = Path(sysconfig.get_paths()["stdlib"])
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in STDLIB_EXCLUDED_DIRS]
        rel_dir = Path(dirpath).relative_to(root)
        found.extend(rel_dir / f for f in filenames if f.endswith(".py"))
    return root, sorted(found, key=lambda p: p.as_posix())


def stdlib_family(rel: Path) -> str:
    """The near-duplicate family of a stdlib file, the unit the train/val split keeps on one side.

    A package is one family (`encodings/cp850.py` and `encodings/cp437.py`, generated codec tables
    ~96% alike, are both "encodings"); a top-level module joins the modules that share its leading
    word, underscores and digits ignored (`sre_compile`, `sre_parse` and `sre_constants`, three
    near-identical shims, are "sre"; `_collections_abc` goes with `collections`).
    """
    head = rel.parts[0].removesuffix(".py").lstrip("_")
    word = re.match(r"[A-Za-z]*", head)
    return (word.group(0) if word and word.group(0) else head).lower()


def _stdlib_texts(root: Path, files: list[Path]) -> Iterator[str]:
    for rel in files:
        raw = (root / rel).read_bytes()
        try:
            yield raw.decode("utf-8")
        except UnicodeDecodeError:
            log.warning("stdlib file %s is not UTF-8; undecodable bytes replaced", rel)
            yield raw.decode("utf-8", errors="replace")


# ---------------------------------------------------------------- local files


def _split_patterns(path: str) -> list[str]:
    return [p.strip() for p in path.split(",") if p.strip()]


def resolve_files(path: str) -> list[Path]:
    """Files matched by comma-separated globs (directories expand to the files under them)."""
    files: list[Path] = []
    for pattern in _split_patterns(path):
        full = str(resolve_path(pattern))
        matched: list[Path] = []
        for hit in sorted(glob.glob(full, recursive=True)):
            p = Path(hit)
            if p.is_dir():
                matched.extend(sorted(f for f in p.rglob("*") if f.is_file() and not f.name.startswith(".")))
            elif p.is_file():
                matched.append(p)
        if not matched:
            raise FileNotFoundError(
                f"data.path={path!r}: no files match pattern {pattern!r} (resolved to {full}); "
                "accepted: files, directories or globs, comma-separated"
            )
        files.extend(matched)
    return list(dict.fromkeys(files))  # keep order, drop files matched by two patterns


def _file_stats(files: Iterable[Path]) -> list[tuple[str, int, int]]:
    stats = []
    for f in files:
        st = f.stat()
        stats.append((str(f), st.st_size, st.st_mtime_ns))
    return sorted(stats)


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


def _builder_for(files: list[Path], what: str) -> str:
    builders = {_BUILDER_BY_SUFFIX.get(f.suffix.lower()) for f in files}
    if None in builders or len(builders) != 1:
        suffixes = sorted({f.suffix for f in files})
        raise ValueError(
            f"{what}: cannot tell the file format from suffixes {suffixes}; "
            f"accepted: one of {sorted(_BUILDER_BY_SUFFIX)}"
        )
    return builders.pop()  # type: ignore[return-value]


def _load_files(builder: str, files: list[Path], cfg: DataConfig) -> datasets.Dataset:
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
            cache_dir=str(resolve_path(cfg.cache_dir) / "hf_datasets"),
            **kwargs,
        )
    except datasets.exceptions.DatasetGenerationError as e:
        cause = e.__cause__ or e
        raise ValueError(
            f"data.path={cfg.path!r}: could not read the {builder} files ({type(cause).__name__}: {cause})"
        ) from e
    return ds


# ---------------------------------------------------------------- hub


def _connection_errors() -> tuple[type[BaseException], ...]:
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


def _hub_unreachable(cfg: DataConfig, err: BaseException) -> ConnectionError:
    return ConnectionError(
        f"data.source=hub: the Hugging Face hub is unreachable for {cfg.name!r} "
        f"({type(err).__name__}); use a local copy instead, e.g. "
        "data.path=/path/to/TinyStories/*.txt data.source=text "
        "(or keep data.source=hub and set data.path to the downloaded dataset directory)"
    )


def _load_hub(cfg: DataConfig) -> datasets.Dataset:
    if cfg.path:
        return _load_hub_local(cfg)
    try:
        if cfg.max_bytes is not None:
            # streaming reads only what max_bytes keeps instead of downloading the whole set
            stream = datasets.load_dataset(cfg.name, cfg.subset, split=cfg.split, streaming=True)
            texts = _take_bytes((row[cfg.text_column] for row in stream), cfg.max_bytes)
            return datasets.Dataset.from_dict({cfg.text_column: list(texts)})
        ds = datasets.load_dataset(cfg.name, cfg.subset, split=cfg.split)
    except _connection_errors() as e:
        raise _hub_unreachable(cfg, e) from e
    except KeyError as e:
        raise ValueError(f"data.text_column={cfg.text_column!r} is not a column of {cfg.name}") from e
    return ds


def _load_hub_local(cfg: DataConfig) -> datasets.Dataset:
    assert cfg.path is not None
    single = resolve_path(cfg.path)
    if single.is_dir():
        ds = datasets.load_dataset(
            str(single),
            cfg.subset,
            split=cfg.split,
            cache_dir=str(resolve_path(cfg.cache_dir) / "hf_datasets"),
        )
        assert isinstance(ds, datasets.Dataset)
        return ds
    files = resolve_files(cfg.path)
    return _load_files(_builder_for(files, f"data.path={cfg.path!r}"), files, cfg)


# ---------------------------------------------------------------- shared


def _take_bytes(texts: Iterable[str | None], max_bytes: int) -> Iterator[str]:
    """Documents until max_bytes UTF-8 bytes; the last one is cut at a character boundary."""
    left = max_bytes
    for text in texts:
        raw = (text or "").encode("utf-8")
        if len(raw) >= left:
            cut = raw[:left].decode("utf-8", errors="ignore")
            if cut:
                yield cut
            return
        left -= len(raw)
        yield text or ""


def _limit_bytes(ds: datasets.Dataset, max_bytes: int) -> datasets.Dataset:
    """Keep the leading documents of `ds` that fit in max_bytes (the last one truncated)."""
    total, batch_size = 0, 1000
    for start in range(0, len(ds), batch_size):
        texts = ds[start : start + batch_size]["text"]
        for i, text in enumerate(texts):
            n = len((text or "").encode("utf-8"))
            if total + n >= max_bytes:
                k = start + i
                cut = list(_take_bytes([text], max_bytes - total))
                head = ds.select(range(k))
                if not cut:
                    return head
                tail = datasets.Dataset.from_dict({"text": cut}, features=ds.features)
                return datasets.concatenate_datasets([head, tail])
            total += n
    return ds


def _text_only(ds: datasets.Dataset, column: str, what: str) -> datasets.Dataset:
    if column not in ds.column_names:
        raise ValueError(
            f"data.text_column={column!r} is not a column of {what}; accepted: one of {ds.column_names}"
        )
    ds = ds.select_columns([column])
    return ds.rename_column(column, "text") if column != "text" else ds


def _stdlib_documents(max_bytes: int | None) -> datasets.Dataset:
    """The stdlib files in path order, each with its family in a "group" column (packing splits
    train/val by group, so near-duplicate files never straddle the split)."""
    root, files = stdlib_files()
    texts: Iterable[str] = _stdlib_texts(root, files)
    if max_bytes is not None:
        texts = _take_bytes(texts, max_bytes)
    kept = list(texts)  # a prefix of the files: max_bytes stops early
    groups = [stdlib_family(f) for f in files[: len(kept)]]
    return datasets.Dataset.from_dict({"text": kept, "group": groups})


def load_documents(cfg: DataConfig) -> datasets.Dataset:
    """Load the configured corpus as documents in a fixed order, one per row of column "text"
    (pystdlib adds column "group": documents of one group go to the same split)."""
    _check_source(cfg)
    if cfg.source == "pystdlib":
        ds = _stdlib_documents(cfg.max_bytes)
    elif cfg.source == "hub":
        ds = _text_only(_load_hub(cfg), cfg.text_column, f"hub dataset {cfg.name or cfg.path}")
    else:
        assert cfg.path is not None
        ds = _load_files(cfg.source, resolve_files(cfg.path), cfg)
        column = "text" if cfg.source == "text" else cfg.text_column
        ds = _text_only(ds, column, f"data.path={cfg.path!r}")
    if cfg.max_bytes is not None and cfg.source != "pystdlib":
        ds = _limit_bytes(ds, cfg.max_bytes)
    log.info("loaded %d documents from data.source=%s", len(ds), cfg.source)
    return ds


def source_size_bound(cfg: DataConfig) -> int | None:
    """An upper bound on the source's text bytes from file sizes alone, where one exists: text and
    JSON files hold at least as many bytes as their text; parquet compresses and hub sets may stream."""
    _check_source(cfg)
    if cfg.source == "pystdlib":
        root, files = stdlib_files()
        size: int | None = sum((root / f).stat().st_size for f in files)
    elif cfg.source in ("text", "json") and cfg.path:
        size = sum(f.stat().st_size for f in resolve_files(cfg.path))
    else:
        size = None
    if cfg.max_bytes is not None:
        size = cfg.max_bytes if size is None else min(size, cfg.max_bytes)
    return size


def source_fingerprint(cfg: DataConfig) -> str:
    """A short hash of what load_documents would return, from metadata only (no file reads)."""
    _check_source(cfg)
    parts: dict[str, object] = {
        "source": cfg.source,
        "max_bytes": cfg.max_bytes,
        "text_column": cfg.text_column,
    }
    if cfg.source == "pystdlib":
        root, files = stdlib_files()
        parts["python"] = sys.version
        parts["files"] = [(f.as_posix(), (root / f).stat().st_size) for f in files]
        parts["split"] = STDLIB_SPLIT
    elif cfg.source == "hub":
        parts.update(name=cfg.name, subset=cfg.subset, split=cfg.split)
        if cfg.path:
            local = resolve_path(cfg.path)
            files = (
                [f for f in local.rglob("*") if f.is_file()] if local.is_dir() else resolve_files(cfg.path)
            )
            parts["files"] = _file_stats(files)
    else:
        assert cfg.path is not None
        parts["files"] = _file_stats(resolve_files(cfg.path))
    return stable_hash(parts)
