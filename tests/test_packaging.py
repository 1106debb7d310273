"""The wheel ships the product, not the team's tools: what `pip wheel .` builds holds gptlab (the speed
benchmark users run included) and no mutation-testing module, no dev/ package, no one-off benchmark.

The oracle is the built wheel itself (a zip file listed here), built from a copy of the files git
tracks so no build output lands in the checkout; `--no-build-isolation` uses this environment's
setuptools (no network)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow  # a setuptools build: 3-12 s on the shared 2-core machine
def test_the_wheel_ships_no_team_tools(tmp_path: Path) -> None:
    tracked = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO, capture_output=True, check=True,
    ).stdout.decode().split("\0")  # fmt: skip
    src = tmp_path / "src-copy"
    for rel in filter(None, tracked):
        if (REPO / rel).is_file():
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / rel, src / rel)
    out = tmp_path / "wheel"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "--no-build-isolation", "-w", str(out)],
        check=True, capture_output=True, cwd=tmp_path,
    )  # fmt: skip
    (wheel,) = out.glob("gptlab-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "gptlab/bench/cli.py" in names and "gptlab/data/plan.py" in names, names[:20]
    # every room of the package ships, the subpackages of analysis/ and evaluation/ included
    rooms = ("gptlab/evaluation/scoring.py", "gptlab/analysis/ladder/fit.py", "gptlab/analysis/sweep/jobs.py",
             "gptlab/analysis/init/stats.py", "gptlab/figures.py")  # fmt: skip
    assert all(r in names for r in rooms), [r for r in rooms if r not in names]
    shipped_tools = [n for n in names if "mutation" in n or n.startswith("dev/") or "/dev/" in n]
    assert not shipped_tools, shipped_tools
    one_offs = (
        "packing.py",
        "bpe_train.py",
        "checkpoint_memory.py",
        "compile_parity.py",
        "sweep.py",
        "child.py",
    )
    assert not [n for n in names if n.startswith("gptlab/bench/") and n.endswith(one_offs)]
