"""Where the data settings point: paths taken against the launch directory, globs expanded to files,
and the short hash that names cache entries. Only the resolution at the top (data.plan) calls these."""

from __future__ import annotations

import glob
import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path


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


def file_stats(files: Iterable[Path]) -> list[tuple[str, int, int]]:
    """(path, size, mtime) of each file, sorted: what identifies local files in a cache key."""
    stats = []
    for f in files:
        st = f.stat()
        stats.append((str(f), st.st_size, st.st_mtime_ns))
    return sorted(stats)
