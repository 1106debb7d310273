"""scripts/bench_bpe_train.py as docs/performance.md runs it ("BPE training"), at tiny sizes: both
trainers run on the same sample and reach the same vocabulary (issue 23, item 4)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytest.importorskip("rustbpe")


def test_bench_bpe_train_script_times_both_trainers(tmp_path: Path) -> None:
    out = tmp_path / "rows.json"
    args = [
        "--sample-mib",
        "1",
        "--vocab-size",
        "512",
        "--rounds",
        "1",
        "--work",
        str(tmp_path),
        "--json",
        str(out),
    ]
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "bench_bpe_train.py"), *args],
                          capture_output=True, text=True, env=env, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = json.loads(out.read_text())
    assert [r["trainer"] for r in rows] == ["tokenizers", "rustbpe"]
    assert [r["n_ids"] for r in rows] == [512, 511]  # rustbpe: no <|endoftext|> id
    for r in rows:  # both compress held-out text (bytes per token well above 1 byte)
        assert r["seconds_median"] > 0 and 2.0 < r["bytes_per_token"] < 8.0, r
    assert "| rustbpe | 1 MiB | 511 |" in proc.stdout
