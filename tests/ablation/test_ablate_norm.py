"""experiment=ablate_norm(_quick): RMSNorm against DyT through the ablation sweeper and its report
(issue 39, item 4). The quick sibling runs here end to end; the full preset's claims row is in
docs/ablations.md."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.cli_here import train_py_run_here
from tests.conftest import QUICK_ENV
from tests.in_process import call_main


@pytest.mark.slow
def test_quick_preset_sweeps_both_norms_and_reports(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    proc = train_py_run_here(  # its jobs one after another in this process (tests/cli_here.py)
        "-m", "experiment=ablate_norm_quick", f"hydra.sweep.dir={sweep}", "logger=csv",
        f"data.cache_dir={tmp_path / 'cache'}", env=QUICK_ENV,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    jobs = sorted((d for d in sweep.iterdir() if d.name.isdigit()), key=lambda d: int(d.name))
    assert len(jobs) == 8
    seen = set()
    for d in jobs:
        m = json.loads((d / "metrics.json").read_text())
        values = dict(o.split("=", 1) for o in m["overrides"])
        model = yaml.safe_load((d / ".hydra" / "config.yaml").read_text())["model"]
        assert m["status"] == "finished" and model["norm"] == values["model/norm"]
        seen.add((values["model/norm"], values["optim.lr"], values["seed"]))
    assert seen == {(a, lr, s) for a in ("rmsnorm", "dyt") for lr in ("0.001", "0.01") for s in ("1", "2")}
    from gptlab.analysis.sweep_summary import main  # scripts/report.py's (its process: tests/analysis)

    report = call_main("scripts/report.py", main, sweep)
    assert report.returncode == 0, report.stderr[-3000:]
    text = (sweep / "report.md").read_text()
    assert "dyt" in text and "rmsnorm" in text
