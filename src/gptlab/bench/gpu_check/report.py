"""The check's two outputs: gpu_check.json (everything) and gpu_check.md (one row per number)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SCALARS = (bool, int, float, str, type(None))


def cell(value: Any) -> str:
    """A value as the table prints it: floats to 6 significant digits, None as "–"."""
    if value is None:
        return "–"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def rows(result: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(section, measurement, value) for every scalar of every section (lists are in the JSON only)."""
    out = []
    for name, section in result["sections"].items():
        for key, value in section.items():
            if isinstance(value, SCALARS):
                out.append((name, key, cell(value)))
            elif isinstance(value, dict) and all(isinstance(v, SCALARS) for v in value.values()):
                out.extend((name, f"{key}.{k}", cell(v)) for k, v in value.items())
            elif isinstance(value, list) and all(isinstance(v, str) for v in value):
                out.append((name, key, ", ".join(value)))
    return out


def table(result: dict[str, Any]) -> str:
    head = f"GPU check ({result['mode']}), {result['seconds']:.0f} s of a {result['budget']:.0f} s budget\n\n"
    lines = ["| section | measurement | value |", "| --- | --- | --- |"]
    lines += [f"| {a} | {b} | {c} |" for a, b, c in rows(result)]
    return head + "\n".join(lines) + "\n"


def write(result: dict[str, Any], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu_check.json").write_text(json.dumps(result, indent=2) + "\n")
    (out / "gpu_check.md").write_text(table(result))
