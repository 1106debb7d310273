"""The commands of README.md and docs/*.md, found as a reader would copy them: fenced lines and
inline code spans that start like a command."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]

# A command starts with python/make/torchrun/srun (after optional VAR=value assignments) or is a
# script of scripts/ given arguments (a bare `scripts/x.py` in prose names a file; a bare .sh runs,
# and so does `bash scripts/x.sh`).
_PROGRAM = re.compile(
    r"^(?:[A-Z_][A-Z0-9_]*=\S+\s+)*"
    r"(?:(?:\.venv/bin/)?python3?\s+(?:-m\s+\S+|-\s|\S+\.py)|make\s+[a-z]|torchrun\s|srun\s|(?:bash\s+)?scripts/\S+\.sh\b"
    r"|scripts/\S+\.py\s)"
)


def normalise(line: str) -> str:
    """One command as the table keys it: no `$ ` prompt, no trailing `# comment` (a `#` after
    whitespace, outside quotes), whitespace collapsed."""
    line = line.strip()
    if line.startswith("$ "):
        line = line[2:]
    kept, quote = [], None
    for i, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            break
        kept.append(ch)
    return " ".join("".join(kept).split())


def documented_commands(text: str) -> list[str]:
    """The commands of one Markdown page: lines of fenced blocks (continuations joined, heredoc
    bodies skipped) and inline code spans, each kept when it is a command (_PROGRAM)."""
    found: list[str] = []
    lines = text.splitlines()
    fenced, heredoc, i = False, None, 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if line.lstrip().startswith("```"):
            fenced, heredoc = not fenced, None
            continue
        if not fenced:
            for span in re.findall(r"`([^`\n]+)`", line):
                if _PROGRAM.match(cmd := normalise(span)):
                    found.append(cmd)
            continue
        if heredoc:
            heredoc = None if line.strip() == heredoc else heredoc
            continue
        while line.rstrip().endswith("\\") and i < len(lines):
            line = line.rstrip()[:-1] + " " + lines[i]
            i += 1
        if _PROGRAM.match(cmd := normalise(line)):
            found.append(cmd)
            if m := re.search(r"<<-?\s*['\"]?(\w+)['\"]?", cmd):
                heredoc = m.group(1)
    return found


def all_documented() -> dict[str, list[str]]:
    """command -> the pages that name it."""
    out: dict[str, list[str]] = {}
    for page in DOCS:
        for cmd in documented_commands(page.read_text()):
            out.setdefault(cmd, []).append(page.relative_to(REPO).as_posix())
    return out
