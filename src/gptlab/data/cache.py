"""The packed cache's entries: what one holds (PackedData), and how entries stay safe to share — an
exclusive lock per key while one process packs, a finished entry trusted only when its files match
meta.json (integrity), scratch left by a killed packer removed, SIGTERM turned into a clean exit."""

from __future__ import annotations

import fcntl
import json
import logging
import shutil
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gptlab.data import integrity
from gptlab.data.tokenizers import Tokenizer

log = logging.getLogger(__name__)
SPLITS = ("train", "val")


@dataclass(frozen=True)
class PackedData:
    """Where the packed token files are, what is in them, and the tokenizer that made them."""

    directory: Path
    meta: dict[str, Any]
    tokenizer: Tokenizer

    def path(self, split: str) -> Path:
        """The flat token file of a split ("train" or "val")."""
        if split not in SPLITS:
            raise ValueError(f"split={split!r} is not accepted; choose one of {SPLITS}")
        return self.directory / f"{split}.bin"

    @property
    def dtype(self) -> np.dtype:
        """The token files' element type."""
        return np.dtype(self.meta["dtype"])

    def tokens(self, split: str) -> np.memmap:
        """The split's tokens, memory-mapped read-only."""
        return np.memmap(self.path(split), dtype=self.dtype, mode="r")


@contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """Exclusive inter-process lock (DDP ranks, parallel sweeps) held while the block runs."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def trusted_meta(out: Path, say: bool) -> dict[str, Any] | None:
    """meta.json of a finished cache entry whose files match it (sizes, sampled checksum; the full
    checksum once per new version of a file, see integrity.unverified_problem), else None; with say,
    one warning line naming what is wrong."""
    meta_file = out / "meta.json"
    if not meta_file.is_file():
        return None
    try:
        meta = json.loads(meta_file.read_text())
        why = integrity.problem(out, meta["files"]) or integrity.unverified_problem(out, meta["files"])
    except (ValueError, KeyError, TypeError) as e:
        why = f"meta.json is unreadable ({type(e).__name__})"
    if why is None:
        return meta
    if say:
        log.warning("cached tokens at %s are damaged (%s): packing them again", out, why)
    return None


def remove_unfinished(root: Path, fp: str) -> None:
    """Scratch directories of packings that never finished (a killed run): never trusted, removed.
    Called under the entry's lock, so no live packer of this fingerprint owns one."""
    for leftover in sorted(root.glob(f".{fp}.*")):
        log.warning("found an unfinished packing at %s (a run killed while packing?): removing it", leftover)
        shutil.rmtree(leftover, ignore_errors=True)


@contextmanager
def sigterm_raises() -> Iterator[None]:
    """While packing, SIGTERM raises Lightning's SIGTERMException instead of killing the process, so
    the unfinished scratch directory is removed and the app records the run as preempted.
    Only in the main thread, and only where nobody else has installed a SIGTERM handler."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        # imported here: lightning costs ~0.5 GB and seconds to import, and the app has it loaded
        from lightning.pytorch.utilities.exceptions import SIGTERMException

        raise SIGTERMException

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
