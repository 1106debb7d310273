"""ablate_moe (issue 47 item 8): its arms compare MoE with dense SwiGLU at equal active parameters
and the dense model at MoE's total, counted here from the shapes' formula (3·d·h a SwiGLU, d·E a
router), not from the model code; its quick sibling runs end to end with the routing telemetry."""

from __future__ import annotations

import json
import math
import re
import statistics
from pathlib import Path

import pytest
import torch

from gptlab.analysis import params
from gptlab.analysis.sweep import moe_load, read_sweep
from gptlab.compose import compose_with_hydra
from tests.cli_here import train_py_run_here
from tests.conftest import QUICK_ENV, column, read_csv_metrics

ARMS = ("dense", "moe_aux", "moe_bias", "dense_total")


def _rows(text: str) -> dict[str, int]:
    """The params tool's rows, label → count."""
    return {m[1]: int(m[2].replace(",", "")) for m in re.finditer(r"^(\S.*?)\s{2,}([\d,]+)\s", text, re.M)}


@pytest.mark.parametrize("preset", ["ablate_moe", "ablate_moe_quick"])
def test_moe_active_equals_dense_and_total_equals_dense_total(
    preset: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`python -m gptlab.analysis.params experiment=ablate_moe model/moe_arm=<arm>`: active (MoE) =
    dense + routers, total (MoE) = dense_total + routers, by the formula."""
    rows = {}
    for arm in ARMS:
        assert params.main([f"experiment={preset}", f"model/moe_arm={arm}"]) == 0
        rows[arm] = _rows(capsys.readouterr().out)
    model = compose_with_hydra([f"experiment={preset}"]).model
    d, L = model.n_embd, model.n_layer
    assert d == 96  # conf/model/moe_arm's widths are written for it
    dense_ffn, expert, experts, top_k = 3 * d * 256, 3 * d * 128, 8, 2
    routers = L * d * experts
    assert experts * expert == 3 * d * 1024 and top_k * expert == dense_ffn  # the arms' design
    assert rows["dense"][f"ffn ({L} blocks)"] == L * dense_ffn
    assert rows["dense_total"][f"ffn ({L} blocks)"] == L * experts * expert
    for arm in ("moe_aux", "moe_bias"):
        assert rows[arm][f"ffn ({L} blocks)"] == L * experts * expert + routers
        assert rows[arm]["active"] == rows["dense"]["total"] + routers
        assert rows[arm]["total"] == rows["dense_total"]["total"] + routers
    assert "active" not in rows["dense"] and "active" not in rows["dense_total"]


def test_moe_arms_differ_only_in_the_balance() -> None:
    cfgs = {a: compose_with_hydra(["experiment=ablate_moe", f"model/moe_arm={a}"]).model for a in ARMS}
    aux, bias = dict(cfgs["moe_aux"].moe), dict(cfgs["moe_bias"].moe)
    assert {k for k in aux if aux[k] != bias[k]} == {"balance"}
    assert (aux["balance"], bias["balance"]) == ("aux_loss", "bias")
    assert [cfgs[a].ffn for a in ARMS] == ["swiglu", "moe", "moe", "swiglu"]


@pytest.mark.slow
def test_ablate_moe_quick_runs_and_reports_with_routing_telemetry(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`python train.py -m experiment=ablate_moe_quick`: 8 jobs of dense and the loss-free-bias MoE,
    a report with the arm − baseline row; the MoE jobs log max/mean load (≥ 1 by definition) and
    move their expert bias, the dense jobs have no experts."""
    out = tmp_path / "sweep"
    proc = train_py_run_here(  # its jobs one after another in this process (tests/cli_here.py)
        "-m", "experiment=ablate_moe_quick", f"hydra.sweep.dir={out}",
        f"data.cache_dir={tmp_path / 'cache'}", "logger=csv", "callbacks.tasks.names=[]",  # no task read here
        env=QUICK_ENV,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = (out / "report.md").read_text()
    assert "8 job(s): 8 finished" in report and "| `moe_bias` | `dense` |" in report
    for k in range(8):  # job order: seed, arm, LR
        assert json.loads((out / str(k) / "metrics.json").read_text())["status"] == "finished"
        state = torch.load(out / str(k) / "checkpoints" / "last.ckpt", weights_only=True)["state_dict"]
        bias = [v for n, v in state.items() if n.endswith("expert_bias")]
        loads = column(read_csv_metrics(out / str(k)), "moe/block_00/max_over_mean_load")
        if k % 4 < 2:  # dense
            assert not bias and not loads
        else:
            assert len(bias) == 1 and bias[0].abs().max() > 0  # 12 steps of ±γ
            assert loads and all(math.isfinite(v) and v >= 1.0 for _, v in loads)
    # `python -m gptlab.analysis.sweep.moe_load <sweep>`: each (arm, LR)'s last-step load, mean over the
    # seeds, against the CSV read here (one block: mean over blocks = the block's value)
    assert moe_load.main([str(out)]) == 0
    printed = capsys.readouterr().out
    key = "moe/block_00/max_over_mean_load"
    for lr, jobs in (("0.001", (2, 6)), ("0.01", (3, 7))):
        series = [[v for _, v in column(read_csv_metrics(out / str(k)), key)] for k in jobs]
        last = [s[-1] for s in series]
        run = statistics.fmean(statistics.fmean(s) for s in series)
        spread = f"{statistics.fmean(last):.3f} [{min(last):.3f}–{max(last):.3f}]"
        assert f"| `moe_bias` | {lr} | 2 | 11 | {spread} | {max(last):.3f} | {run:.3f} [" in printed, printed
    assert "`dense`" not in printed
    # a job still running (its metrics.json says so) is not counted
    metrics = out / "3" / "metrics.json"
    metrics.write_text(json.dumps({**json.loads(metrics.read_text()), "status": "running"}))
    rows = [r for r in moe_load.table(read_sweep(out)) if r.startswith("| `moe_bias` | 0.01 |")]
    assert len(rows) == 1 and rows[0].startswith("| `moe_bias` | 0.01 | 1 | 11 |"), rows
