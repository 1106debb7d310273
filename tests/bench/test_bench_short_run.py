"""dev/bench/short_run.py and dev/bench/nanogpt_pair.py (docs/performance.md, "Short runs"): the phase
clock charges each second to the innermost phase, the breakdown runs end to end on a tiny run and its
table adds up, and the pair benchmark lays a dataset out as nanoGPT reads it."""

from __future__ import annotations

import io
import json
import pickle
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from dev.bench.nanogpt_pair import prepare_nanogpt
from dev.bench.short_run import LIGHTNING_PULLS, PhaseClock
from tests.conftest import run_module


def test_phase_clock_charges_the_innermost_phase() -> None:
    clock = PhaseClock()
    clock.switch("outer")
    time.sleep(0.05)
    clock.enter("inner")
    time.sleep(0.1)
    clock.leave()
    time.sleep(0.05)
    clock.switch("done")
    clock._charge()
    assert clock.wall["inner"] == pytest.approx(0.1, abs=0.04)
    assert clock.wall["outer"] == pytest.approx(0.1, abs=0.04)  # 0.05 before + 0.05 after, not 0.2
    assert clock.count == {"outer": 1, "inner": 1, "done": 1}


class _Plain(pickle.Unpickler):
    """nanoGPT's meta.pkl is a pickle by its format: read with no class allowed (dicts, str, int)."""

    def find_class(self, module: str, name: str) -> None:
        raise pickle.UnpicklingError(f"meta.pkl names a class {module}.{name}: only plain values expected")


def test_nanogpt_layout(tmp_path: Path) -> None:
    """Character ids of the sorted character set, the first 90 % train (nanoGPT's prepare.py layout)."""
    text = tmp_path / "t.txt"
    text.write_text("hello world\nabc" * 7)
    vocab = prepare_nanogpt(text, tmp_path / "d")
    data = text.read_text()
    chars = sorted(set(data))
    assert vocab == len(chars) == 12
    train = np.fromfile(tmp_path / "d" / "train.bin", dtype=np.uint16)
    val = np.fromfile(tmp_path / "d" / "val.bin", dtype=np.uint16)
    assert len(train) == int(len(data) * 0.9) and len(train) + len(val) == len(data)
    meta = _Plain(io.BytesIO((tmp_path / "d" / "meta.pkl").read_bytes())).load()
    assert "".join(meta["itos"][int(i)] for i in [*train, *val]) == data
    assert meta["vocab_size"] == vocab and meta["stoi"]["h"] == chars.index("h")


def test_the_imports_the_breakdown_names_are_lightnings_own(tmp_path: Path) -> None:
    """Each module the breakdown times before `lightning` (LIGHTNING_PULLS) is one that a bare
    `import lightning` imports in a fresh interpreter: a row a run pays, not one the bench adds."""
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import json, sys\nimport lightning\n"
        f"print(json.dumps([m for m in {list(LIGHTNING_PULLS)!r} if m not in sys.modules]))\n"
    )
    proc = subprocess.run(
        [sys.executable, str(probe)], capture_output=True, text=True, timeout=300, check=False
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == []


def test_pair_without_a_nanogpt_checkout_is_one_line(tmp_path: Path) -> None:
    proc = run_module("dev.bench.nanogpt_pair", "--nanogpt", str(tmp_path), timeout=120)
    assert proc.returncode == 2
    assert "--nanogpt=" in proc.stdout and "karpathy/nanoGPT checkout" in proc.stdout


@pytest.mark.slow
def test_pair_summary_gives_the_ratio_of_medians_and_the_median_difference() -> None:
    from dev.bench.nanogpt_pair import summary

    runs = {
        "nanogpt": [{"cpu_s": 5.0}, {"cpu_s": 6.0}, {"cpu_s": 5.5}],
        "gptlab": [{"cpu_s": 9.0}, {"cpu_s": 10.5}, {"cpu_s": 9.0}],
    }
    ratio, diff = summary(20, runs).splitlines()
    # medians 9.0 / 5.5; the rounds' differences 4.0, 4.5, 3.5 (not the medians' 3.5)
    assert ratio == (
        "20 steps, 3 rounds, one thread each: nanoGPT 5.5 CPU s, gptlab 9.0 CPU s (medians); "
        "gptlab / nanoGPT = 1.636 (per round 1.800, 1.750, 1.636)"
    )
    assert diff.startswith("gptlab − nanoGPT: +4.00 CPU s,")
    assert diff.endswith("(per round +4.00, +4.50, +3.50)")


def test_breakdown_runs_and_adds_up(tmp_path: Path) -> None:
    out = tmp_path / "phases.json"
    proc = run_module(
        "dev.bench.short_run", "--shape", "tiny", "--steps", "4", "--project", "100",
        "--work", str(tmp_path / "work"), "--json", str(out), "--set", "sample.max_new_tokens=8",
        "--set", "logger=csv",
        # no attention heat maps (no phase of the list below draws them) and no tokenizing pool: the
        # warm run's 1 MB of bytes is packed in-process, the measured run reads the cache
        "--set", "callbacks.telemetry.figures=false", "--set", "data.num_proc=1", timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    phases = json.loads(out.read_text())
    cpu = phases["cpu"]
    for name in ("imports", "compose", "data", "model", "first step", "steps", "validation", "tasks",
                 "checkpoints", "sample", "metrics.json", "run-end view"):  # fmt: skip
        assert name in cpu, name
    assert phases["count"]["validation"] == 2  # after steps 2 and 4
    assert phases["count"]["steps"] == 3  # steps 2..4 (the first has its own row)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("| ")]
    rows = {line.split(" | ")[0].strip("| "): line for line in lines}
    total = float(rows["**total**"].split(" | ")[1].strip("*"))
    assert total == pytest.approx(sum(cpu.values()) + phases["children_cpu"], abs=0.02)
    # projected to 100 steps at the auto cadence: one validation every 100 steps, the tasks once
    assert "(1 validations, 1 task evaluation(s))" in proc.stdout
    assert list(phases["imports"])[:6] == ["torch", *LIGHTNING_PULLS, "lightning"]
