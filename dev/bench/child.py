"""One measurement in a fresh interpreter: `python -m <module> --child <json spec>` prints its result
as JSON on its last stdout line (the packing and BPE-training benchmarks share this)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]  # dev/ is importable from the repository root only


def run_child(module: str, spec: dict[str, Any], what: str) -> dict[str, Any]:
    """Run `module`'s child mode on `spec` with one OpenMP thread; its JSON result, or RuntimeError
    naming `what` failed with the end of its stderr."""
    pythonpath = os.environ.get("PYTHONPATH", "")
    proc = subprocess.run(
        [sys.executable, "-m", module, "--child", json.dumps(spec)],
        capture_output=True,
        text=True,
        check=False,
        env={
            **os.environ,
            "OMP_NUM_THREADS": "1",
            "PYTHONPATH": os.pathsep.join(filter(None, (str(REPO), pythonpath))),
        },
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{what} failed: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])
