"""dev/bench_bpe_train.py as docs/performance.md runs it ("BPE training"), at tiny sizes: both
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
    proc = subprocess.run([sys.executable, str(REPO / "dev" / "bench_bpe_train.py"), *args],
                          capture_output=True, text=True, env=env, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = json.loads(out.read_text())
    assert [r["trainer"] for r in rows] == ["tokenizers", "rustbpe"]
    assert [r["n_ids"] for r in rows] == [512, 511]  # rustbpe: no <|endoftext|> id
    for r in rows:  # both compress held-out text (bytes per token well above 1 byte)
        assert r["seconds_median"] > 0 and 2.0 < r["bytes_per_token"] < 8.0, r
    assert "| rustbpe | 1 MiB | 511 |" in proc.stdout


@pytest.mark.slow
def test_bench_bpe_train_budgets_on_python_sources(tmp_path: Path) -> None:
    """--budget-mib trains on data.bpe_train_bytes' sample of the same corpus: the sample's size is
    the budget (to within a document), the whole sample at `all`."""
    out = tmp_path / "rows.json"
    args = ["--sample-mib", "2", "--vocab-size", "300", "--rounds", "1", "--trainers", "rustbpe",
            "--budget-mib", "1,all", "--corpus", "python-sources",
            "--work", str(tmp_path), "--json", str(out)]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, str(REPO / "dev" / "bench_bpe_train.py"), *args],
                          capture_output=True, text=True, env=env, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    budget, whole = json.loads(out.read_text())
    assert (budget["budget_mib"], whole["budget_mib"]) == (1, None)
    assert 0.9 < budget["trained_mib"] <= 1.05, budget
    assert 1.95 < whole["trained_mib"] <= 2.0, whole
    assert "| rustbpe | 1 MiB spread over 2 MiB | 299 |" in proc.stdout, proc.stdout
    corpus = (tmp_path / "python_sources_6MiB.txt").read_text()
    assert "def " in corpus and corpus.count("<|endoftext|>") > 10  # real source files, one per document
