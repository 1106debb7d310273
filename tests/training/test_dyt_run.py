"""model.norm=dyt end to end: `python train.py model.norm=dyt` trains, every DyT site's α is logged
as the model holds it, its metric names are documented, and the HF export refuses the checkpoint."""

from __future__ import annotations

import re
from pathlib import Path

import torch

from gptlab.dashboards.keys import families, shape_of
from gptlab.dashboards.view import Target, build_view, panel_keys
from tests.conftest import TINY, column, read_csv_metrics, run_script
from tests.training.rel_harness import csv_rows, train_here
from tests.training.test_metric_names_documented import documented


def test_alpha_of_every_site_is_logged_as_the_model_holds_it(tmp_path: Path, cache: Path) -> None:
    train_here(
        tmp_path,
        cache,
        "model.norm=dyt",
        "model.norm_placement=sandwich",
        "model.dyt_alpha0=0.3",
        "optim.lr=3e-3",
        "trainer.max_steps=4",
        "trainer.val_check_interval=4",
    )
    rows = csv_rows(tmp_path)
    sites = [
        f"block_{i:02d}/{s}"
        for i in range(2)
        for s in ("attn_norm", "ffn_norm", "attn_out_norm", "ffn_out_norm")
    ]
    keys = [f"dyt_alpha/{s}" for s in [*sites, "final_norm"]]
    logged = {k for row in rows for k, v in row.items() if v and k.startswith("dyt_alpha/")}
    assert logged == set(keys)
    state = torch.load(tmp_path / "checkpoints" / "last.ckpt", weights_only=True)["state_dict"]
    for key in keys:
        site = key.removeprefix("dyt_alpha/")
        m = re.fullmatch(r"block_(\d+)/(\w+)", site)
        name = f"model.blocks.{int(m.group(1))}.{m.group(2)}.alpha" if m else "model.final_norm.alpha"
        series = [(int(r["step"]), float(r[key])) for r in rows if r.get(key)]
        assert [s for s, _ in series] == [0, 1, 2, 3]
        # after the last step: the checkpoint's α (written after it), not its init
        assert abs(series[-1][1] - float(state[name])) < 1e-6, key
        assert all(abs(v - 0.3) < 0.05 for _, v in series) and series[-1][1] != 0.3
    names = {re.sub(r"block_\d{2}", "block_{i:02d}", k) for k in logged}
    assert not names - documented(), f"not in docs/architecture.md's metric table: {names - documented()}"


def test_train_py_with_dyt_learns_and_export_refuses_it(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    proc = run_script(
        "train.py",
        *TINY,
        "model.norm=dyt",
        "trainer.max_steps=30",
        "trainer.val_check_interval=10",
        "optim.lr=3e-3",
        "optim.warmup_steps=5",
        f"hydra.run.dir={run_dir}",
        f"data.cache_dir={tmp_path / 'cache'}",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = read_csv_metrics(run_dir)
    logged = {k for row in rows for k, v in row.items() if v and k.startswith("dyt_alpha/")}
    predicted = families(shape_of(run_dir))["dyt_alpha"]  # the dashboard's keys, from the config alone
    assert set(predicted) == logged and len(logged) == 2 * 2 + 1
    view = build_view(shape_of(run_dir), Target(entity="e", project="p", name="n", run_ids=["r"]))
    assert set(predicted) <= panel_keys(view)
    val = column(rows, "val/loss")
    assert [s for s, _ in val] == [9, 19, 29]
    assert val[-1][1] < val[0][1] - 0.1, val
    out = run_script(
        "scripts/export.py",
        f"ckpt_path={run_dir / 'checkpoints' / 'last.ckpt'}",
        f"out_dir={tmp_path / 'hf'}",
    )
    assert out.returncode == 2 and not (tmp_path / "hf").exists()
    assert out.stderr.count("\n") == 1 and "model.norm='dyt' cannot be expressed by" in out.stderr, out.stderr
