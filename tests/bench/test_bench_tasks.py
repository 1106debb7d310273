"""dev/bench/tasks.py at tiny sizes, through its command line: both tokenizations (bytes for a
256-id model, one token a word for a larger vocabulary), the table, and the lengths the docs state."""

from __future__ import annotations

import json
from pathlib import Path

from dev.bench import tasks as bench

TINY = ["model.n_layer=1", "model.n_embd=32", "model.n_head=2", "model.block_size=128"]


def test_bench_runs_both_presets_and_prints_the_table(tmp_path: Path, capsys) -> None:
    out = tmp_path / "rows.json"
    argv = ["--batch-sizes", "1,3", "--items", "2", "--rounds", "1", "--json", str(out), *TINY]
    assert bench.main(argv) == 0
    rows = json.loads(out.read_text())
    assert [(r["preset"], r["batch_size"]) for r in rows] == [
        ("pre_rmsnorm_swiglu", 1), ("pre_rmsnorm_swiglu", 3), ("gpt2", 1), ("gpt2", 3),
    ]  # fmt: skip
    assert all(r["items_s_median"] > 0 and r["items_cpu_s_median"] > 0 and r["gflop_cpu_s"] > 0 for r in rows)
    assert all(0 < r["beside_forwards_median"] < 1 for r in rows)
    byte, words = rows[0], rows[2]
    assert byte["request_tokens"] == 129 and byte["cut"] == 2  # ~330 bytes cut to block_size + 1
    assert words["request_tokens"] == bench.CONTEXT_WORDS + bench.ENDING_WORDS and words["cut"] == 0
    out = capsys.readouterr().out
    assert "| gpt2 | " in out and "gpt2 batch 3: " in out and "beside the model's forwards" in out


def test_the_synthetic_items_have_hellaswag_like_lengths() -> None:
    items = bench.synthetic_items(50, bench.vocabulary(2000))
    context = sum(len(it.context.encode()) for it in items) / 50
    ending = sum(len(c.encode()) for it in items for c in it.choices) / 200
    assert 200 < context < 240 and 95 < ending < 125
    assert all(len(it.choices) == 4 and it.delimiter == " " for it in items)
