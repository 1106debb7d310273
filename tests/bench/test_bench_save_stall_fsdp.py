"""dev/bench/save_stall_fsdp.py (docs/performance.md): at the tiny shape, in this process as one gloo
rank (the documented command spawns two), both ways save, every save is timed, and the last
asynchronous checkpoint, loaded back after the steps that followed its save, holds the weights of
its save."""

from __future__ import annotations

from pathlib import Path

from dev.bench import save_stall_fsdp


def test_fsdp_save_stall_times_both_ways(tmp_path: Path) -> None:
    res = save_stall_fsdp.main(
        ["--shape", "tiny", "--ranks", "1", "--rounds", "1", "--saves", "2", "--dir", str(tmp_path)]
    )
    for mode in save_stall_fsdp.MODES:
        assert len(res[mode]["stall"]) == 2 and all(t > 0 for t in res[mode]["stall"]), mode
        assert res[mode]["median_cycle"] >= res[mode]["median_stall"], mode
    assert res["async_equals_its_snapshot"] is True
    assert res["bytes"] > 0
