"""gptlab.heap: start-up imports leave the collector paused while they run, then frozen
(`gc.freeze`), so no full collection walks torch's and Lightning's objects again; a block that
imports nothing (a sweep's later job in the same process) freezes nothing. The oracle is CPython's
own gc state (gc.isenabled, gc.get_freeze_count, gc.collect's count), read in a fresh interpreter.
train.py's own start-up is checked in tests/training/test_early_refusal.py (its refused run's full
collections, by gc.callbacks)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO

CHILD = """
import gc, json
from gptlab.heap import imports_unscanned

out = {"frozen_at_start": gc.get_freeze_count()}
with imports_unscanned():
    out["paused"] = not gc.isenabled()
    import decimal, email.message, xml.dom.minidom  # not imported yet
out["frozen"] = gc.get_freeze_count()
out["enabled"] = gc.isenabled()


class Node:
    pass


a, b = Node(), Node()
a.other, b.other = b, a
del a, b  # a cycle of garbage, as an earlier job of a sweep leaves
with imports_unscanned():
    import decimal  # imported already
out["frozen_again"] = gc.get_freeze_count()
out["collected"] = gc.collect()
gc.disable()
with imports_unscanned():
    import fractions
out["stays_disabled"] = not gc.isenabled()
print(json.dumps(out))
"""


def test_imports_run_unscanned_then_frozen_and_a_block_without_imports_freezes_nothing() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", CHILD], cwd=REPO, capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["frozen_at_start"] == 0 and out["paused"] and out["enabled"]
    assert out["frozen"] > 1000  # the interpreter's objects and the imported modules'
    assert out["frozen_again"] == out["frozen"]  # nothing imported: the cycle above stays collectable
    assert out["collected"] >= 2
    assert out["stays_disabled"]  # the caller's setting is restored, not forced on


def started_walks(runs: dict[str, list[str]], tmp_path: Path) -> dict[str, tuple[int, str, int]]:
    """Each entry point with its arguments, run at once under the gc recorder of
    tests/training/test_early_refusal.py: (exit code, stdout + stderr, the largest full collection)."""
    from tests.training.test_early_refusal import RECORD

    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "WANDB_MODE": "disabled", "OMP_NUM_THREADS": "1"}
    env |= {k: v for k, v in os.environ.items() if k == "PYTHONPATH"}  # a mutated copy's source
    procs = {
        name: subprocess.Popen(
            [sys.executable, "-c", RECORD, str(REPO / name), *args],
            cwd=REPO,
            env={**env, "GC_RECORD": str(tmp_path / f"{Path(name).name}.json")},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for name, args in runs.items()
    }
    out = {}
    for name, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=300)
        walks = json.loads((tmp_path / f"{Path(name).name}.json").read_text())
        out[name] = (proc.returncode, stdout + stderr, max(walks, default=0))
    return out


def test_evaluate_and_generate_import_unscanned(tmp_path: Path) -> None:
    """evaluate.py and generate.py import torch (and Lightning) as train.py does: no full collection
    walks their objects (before, one import walked ~100,000 to 480,000 of them, ~1 CPU s). A missing
    checkpoint is refused after the imports, so each script's whole start-up runs."""
    missing = f"ckpt_path={tmp_path / 'missing.ckpt'}"
    for script, (code, said, walked) in started_walks(
        {"evaluate.py": [missing], "generate.py": [missing]}, tmp_path
    ).items():
        assert code == 2 and "missing.ckpt" in said, (script, said[-2000:])
        assert walked < 50_000, (script, walked)


# each script's start-up to its usage line or first refusal: the imports that follow are its own
SCRIPTS = ["export.py", "consolidate.py", "coord_check.py", "depth_check.py", "init_report.py",
           "dashboard.py", "plot_qk_norm_sweep.py", "plan.py"]  # fmt: skip


def test_scripts_import_unscanned(tmp_path: Path) -> None:
    """The scripts that import torch (or wandb) freeze those imports as train.py does: before, each
    paid two to seven full collections walking up to ~420,000 objects (plan.py)."""
    runs = started_walks({f"scripts/{s}": ["--help"] for s in SCRIPTS}, tmp_path)
    for script, (_, said, _) in runs.items():
        assert "usage" in said.lower() or "error:" in said, (script, said[-2000:])
    assert all(walked < 50_000 for _, _, walked in runs.values()), {k: v[2] for k, v in runs.items()}
