"""dev/bench/packing.py's BPE rows: both encoders side by side, each checked to have run, and the
run refused when they packed different bytes (issue 23, item 2)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dev.bench import packing as bench


def test_bpe_rows_run_both_encoders_and_agree(tmp_path: Path) -> None:
    rows = bench.run([1 << 20], ["bpe"], [1], 1, tmp_path)
    assert [r["tokenizer"] for r in rows] == ["bpe (tiktoken)", "bpe (tokenizers)"]
    assert all(r["mb_s_median"] > 0 and r["rss_mib_max"] > 0 for r in rows)
    table = bench.format_table(rows)
    assert "| bpe (tiktoken) | 1 | 1 MiB |" in table and "load average" in table


def test_encoders_that_pack_different_bytes_fail_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fake(case: bench.Case, *args: Any) -> dict[str, Any]:
        crc = 1 if case.encoder == "tiktoken" else 2
        return {"mb_s": 1.0, "mb_cpu_s": 1.0, "rss_mib": 1.0, "worker_rss_mib": 0.0, "files": {"crc": crc}}

    monkeypatch.setattr(bench, "measure", fake)
    monkeypatch.setattr(bench, "train_bpe", lambda corpus, out: out)
    with pytest.raises(RuntimeError, match="packed different bytes"):
        bench.run([1 << 16], ["bpe"], [1], 1, tmp_path)
