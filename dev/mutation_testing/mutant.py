"""One deliberate breakage: it replaces one exact snippet of one file under src/gptlab/ (the
snippet must occur exactly once, so a stale one shows up as an error instead of a silent no-op)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Mutant:
    name: str
    file: str  # relative to src/gptlab/
    old: str
    new: str
    why: str


BASELINE = Mutant("baseline", "__init__.py", "", "", "the unmutated tree passes")
