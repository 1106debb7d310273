"""dev/bench/muon_step.py (docs/optim.md): runs at the tiny shape and prints one row per optimizer, with
fewer ops and no host read for BatchedMuon."""

from __future__ import annotations

import re

import pytest

from dev.bench import muon_step


def test_bench_muon_prints_both_rows(capsys: pytest.CaptureFixture[str]) -> None:
    assert muon_step.main(["--shape", "tiny", "--rounds", "1"]) == 0
    out = capsys.readouterr().out
    rows = {
        m[0]: (int(m[1]), int(m[2])) for m in re.findall(r"^\| (\S+) \| (\d+) \|.*\| (\d+) \|$", out, re.M)
    }
    assert set(rows) == {"torch.optim.Muon", "BatchedMuon"}, out
    assert rows["BatchedMuon"][0] < rows["torch.optim.Muon"][0]
    assert rows["BatchedMuon"][1] == 0 and rows["torch.optim.Muon"][1] == 1
