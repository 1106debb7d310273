"""dev/bench/callback_costs.py: the per-callback, per-signal CPU table of a real (tiny) run."""

from __future__ import annotations

import re

import pytest

from dev.bench import callback_costs

TINY = [
    "model.n_layer=1",
    "model.n_embd=32",
    "model.n_head=2",
    "model.block_size=32",
    "data.batch_size=2",
    "data.max_bytes=60000",
    "data.num_proc=1",
    "data.val_windows=4",
    "callbacks.tasks.names=[]",
]


def test_callback_costs_prints_each_piece_by_kind_of_step(capsys: pytest.CaptureFixture[str]) -> None:
    """Warm-up 1, then 4 steps with telemetry every 2: 2 plain steps, 2 log steps (the first an
    attention step); the log step's pieces run on log steps only, the guard's norms on every step."""
    assert callback_costs.main(["--steps", "4", "--warmup", "1", "--every", "2", *TINY]) == 0
    out = capsys.readouterr().out
    assert re.search(r"plain \(2\)\s+log \(1\)\s+attention log \(1\)", out), out
    rows = {line[:52].strip(): line[52:].split() for line in out.splitlines() if "×" in line}
    # columns: plain ms, ×calls, log ms, ×calls, attention ms, ×calls
    assert rows["telemetry.weights_before"][1::2] == ["×0", "×1", "×1"], rows
    assert rows["attention_stats"][1::2] == ["×0", "×0", "×1"], rows
    assert rows["module.logit_moments"][1::2] == ["×0", "×1", "×1"], rows
    assert rows["module.nonfinite.total_norm"][1::2] == ["×1", "×1", "×1"], rows
