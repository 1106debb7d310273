"""dev/bench/moe_step.py (docs/performance.md, "MoE against dense"): one row per arm of the preset,
the parameter columns against the formula, a bad count refused in one line."""

from __future__ import annotations

import re

import pytest

from dev.bench import moe_step


def test_moe_step_prints_one_row_per_arm(capsys: pytest.CaptureFixture[str]) -> None:
    """`python -m dev.bench.moe_step experiment=ablate_moe`, at the quick preset's one block."""
    argv = [
        "experiment=ablate_moe_quick",
        "--arms",
        "dense,moe_aux",
        "--rounds",
        "2",
        "--steps",
        "1",
        "--warmup",
        "1",
    ]
    assert moe_step.main(argv) == 0
    out = capsys.readouterr().out
    rows = {
        m[1]: m
        for m in re.finditer(r"^\| (\w+) \| ([\d,]+) \| ([\d,]+) \| ([\d,]+) \| ([\d.]+) \[", out, re.M)
    }
    assert set(rows) == {"dense", "moe_aux"}, out
    n = {a: (int(m[2].replace(",", "")), int(m[3].replace(",", ""))) for a, m in rows.items()}
    d, router = 96, 96 * 8  # one block: 8 experts of 3·d·128 against a dense 3·d·256
    assert n["moe_aux"][1] == n["dense"][1] + router  # active
    assert n["moe_aux"][0] - n["moe_aux"][1] == 6 * 3 * d * 128  # the 6 experts a token skips
    assert all(float(m[5]) > 0 for m in rows.values())
    assert "load average" in out and "1 torch thread" in out


@pytest.mark.parametrize(
    "argv,line",
    [
        (
            ["experiment=ablate_moe_quick", "--rounds", "0"],
            "error: --rounds=0 is not accepted; give an integer >= 1",
        ),
        (
            ["experiment=ablate_moe_quick", "--warmup", "-1"],
            "error: --warmup=-1 is not accepted; give an integer >= 0",
        ),
        ([], "error: give a preset with hydra.sweeper.arm and arms (e.g. experiment=ablate_moe)"),
    ],
)
def test_bad_counts_are_refused_in_one_line(
    argv: list[str], line: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert moe_step.main(argv) == 2
    assert capsys.readouterr().err.strip() == line
