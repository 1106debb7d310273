"""dev/bench/save_stall.py (docs/performance.md): at the tiny shape both ways save, the one-write way
leaves last.ckpt a hard link to best.ckpt, and the checkpoint's bytes are at least the model's and
AdamW's fp32 state (3 × 4 bytes a parameter)."""

from __future__ import annotations

import os
from pathlib import Path

from dev.bench import save_stall
from gptlab.model import GPT, GPTConfig


def test_save_stall_times_both_ways(tmp_path: Path) -> None:
    res = save_stall.main(["--shape", "tiny", "--rounds", "1", "--dir", str(tmp_path)])
    assert set(res["median"]) == {"before: two writes", "after: one write + link"}
    assert all(t > 0 for t in res["median"].values())
    n = GPT(GPTConfig.from_dict(save_stall.SHAPES["tiny"])).num_params()
    assert res["bytes"] >= 12 * n


def test_one_write_links_last_to_best(tmp_path: Path) -> None:
    ckpt = save_stall.checkpoint("tiny")
    save_stall.one_write(save_stall.AtomicCheckpointIO(), ckpt, tmp_path)
    assert os.path.samefile(tmp_path / "best.ckpt", tmp_path / "last.ckpt")
    save_stall.two_writes(save_stall.AtomicCheckpointIO(), ckpt, tmp_path / "two")
    assert not os.path.samefile(tmp_path / "two" / "best.ckpt", tmp_path / "two" / "last.ckpt")
