"""The GPU check's CPU dry run: the same entry and sections as on the lent GPU, at a tiny shape.

Oracles: the JSON holds every section with a status, the measurements each section promises, and
the markdown table's every value is the JSON's (formatted as `report.cell` states, re-parsed here).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gptlab.bench.gpu_check.sections import SECTIONS

ROOT = Path(__file__).resolve().parents[2]
PROMISED = {
    "env": {"device", "versions", "float32_matmul_precision", "compile_default"},
    "sdpa": {"backends"},
    "gpt2_bare_eager": {"tokens_per_sec", "mfu", "step_ms"},
    "gpt2_bare_compiled": {"tokens_per_sec", "mfu", "graphs_compiled"},
    "gpt2_lightning_eager": {"tokens_per_sec", "fused", "syncs_per_step", "peak_gib"},
    "gpt2_lightning_compiled": {"tokens_per_sec", "graphs_compiled"},
    "llama_350m_compiled": {"tokens_per_sec", "mfu"},
    "parity": {"fp32_eager", "bf16_compiled", "max_rel_diff", "rtol", "passed"},
    "memory": {"plain_step_gib", "log_step_gib", "planned_gib"},
    "ddp": {"tokens_per_sec"},
    "fsdp": {"tokens_per_sec"},
}


def _value(cell: str) -> object:
    if cell == "–":
        return None
    if cell in ("true", "false"):
        return cell == "true"
    try:
        return float(cell)
    except ValueError:
        return cell


@pytest.mark.slow
def test_dry_run_writes_every_section_and_the_table_matches_the_json(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    cmd = [sys.executable, "-m", "gptlab.bench.gpu_check", "--dry-run", "--out", str(tmp_path)]
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads((tmp_path / "gpu_check.json").read_text())
    assert list(result["sections"]) == list(SECTIONS)  # one process, the fixed order
    for name, keys in PROMISED.items():
        section = result["sections"][name]
        assert section["status"] == "ok", (name, section)
        assert keys <= set(section), (name, keys - set(section))
    assert result["sections"]["parity"]["passed"] is True
    assert len(result["sections"]["parity"]["fp32_eager"]) == 3
    assert result["sections"]["gpt2_bare_compiled"]["tokens_per_sec"] > 0
    # every row of the table is the JSON's number
    lines = (tmp_path / "gpu_check.md").read_text().splitlines()
    table = [line.strip("|").split("|") for line in lines if line.startswith("| ") and "---" not in line][1:]
    assert len(table) > 60
    for section, key, cell in ((a.strip(), b.strip(), c.strip()) for a, b, c in table):
        value = result["sections"][section]
        for part in key.split("."):
            value = value[part]
        shown = _value(cell)
        if isinstance(value, float):
            assert math.isclose(shown, value, rel_tol=1e-5), (section, key, cell, value)
        elif isinstance(value, list):
            assert cell == ", ".join(value)
        else:
            assert shown == value or cell == str(value), (section, key, cell, value)


def test_unknown_section_is_refused_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    """The refusal comes before any section runs: main() in this process (torch is imported here
    already); `python -m gptlab.bench.gpu_check` itself is the dry run's subprocess above."""
    from gptlab.bench.gpu_check.cli import main

    with pytest.raises(SystemExit) as done:
        main(["--dry-run", "--only", "nope"])
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert "--only" in err and "gpt2_bare_eager" in err and len(err.strip().splitlines()) == 1
