"""A local text corpus the size of tiny shakespeare (1,115,394 characters) for the short-run
benchmarks, from the Python standard library's sources: no network, the same bytes on every machine
with the same Python. Files are joined by a blank line, so `data.doc_separator='\\n\\n'` splits them."""

from __future__ import annotations

import sysconfig
from pathlib import Path

SIZE = 1_115_394  # characters of karpathy/char-rnn's tinyshakespeare input.txt


def local_text(path: Path, size: int = SIZE) -> Path:
    """Write (once) the first `size` ASCII characters of the stdlib's top-level .py files, sorted."""
    if path.exists() and path.stat().st_size == size:
        return path
    parts, n = [], 0
    for f in sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py")):
        text = f.read_text(encoding="utf-8", errors="ignore").encode("ascii", "ignore").decode()
        parts.append(text)
        n += len(text) + 2
        if n >= size:
            break
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n\n".join(parts)[:size])
    return path
