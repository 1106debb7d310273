"""dev/bench/step_split.py (docs/performance.md, "Short runs", fifth pass): gptlab's three loops run
at the tiny shape and print a table whose differences are the medians' own, and a `--nanogpt` that
holds no model.py is refused in one line before anything is built. Run in this process (the bench
sets one torch thread: tests/process_state.py puts the thread count back)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dev.bench.step_split import main
from tests.process_state import kept

ROUNDING = 0.0151  # three values printed to 0.01 ms, each off by <= 0.005


def test_tiny_split_prints_each_loop_and_their_differences(capsys: pytest.CaptureFixture[str]) -> None:
    with kept():
        assert main(["--shape", "tiny", "--rounds", "1", "--steps", "2", "--warmup", "1"]) == 0
    out = capsys.readouterr().out
    ms = {k: float(v) for k, v in re.findall(r"^\| (\w+) \| ([0-9.]+) \|$", out, re.M)}
    assert set(ms) == {"plain", "lightning", "fit"}  # no nanoGPT loops without a checkout
    assert all(v > 0 for v in ms.values())
    lightning = re.search(r"^Lightning's loop \(lightning − plain\): ([+-][0-9.]+) ms", out, re.M)
    framework = re.search(r"^gptlab's framework \(fit − lightning\): ([+-][0-9.]+) ms", out, re.M)
    assert lightning and framework, out
    assert float(lightning.group(1)) == pytest.approx(ms["lightning"] - ms["plain"], abs=ROUNDING)
    assert float(framework.group(1)) == pytest.approx(ms["fit"] - ms["lightning"], abs=ROUNDING)


def test_a_nanogpt_dir_without_its_model_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--nanogpt", str(tmp_path), "--shape", "tiny"]) == 2
    out = capsys.readouterr().out.strip().splitlines()
    assert out == [f"error: --nanogpt={str(tmp_path)!r} holds no model.py; give a karpathy/nanoGPT checkout"]
