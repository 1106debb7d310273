"""Telemetry names in the CSV log, and that a block's own gradient shows up under its own name.

In-process: the LightningModule and a Lightning Trainer on random tokens, no Hydra, no subprocess.
A test-only callback recomputes every group's gradient norm from the parameters' names (plain
`torch.linalg.vector_norm`, independent of the callback's packed `_foreach_norm`) at the same hook.
"""

from __future__ import annotations

import csv
import dataclasses
import math
import re
from pathlib import Path
from typing import Any

import lightning as L
import pytest
import torch
from lightning.pytorch.loggers import CSVLogger
from torch.utils.data import DataLoader

from gptlab.config import OptimConfig
from gptlab.model import GPTConfig
from gptlab.training.callbacks.telemetry import LayerTelemetry
from gptlab.training.module import GPTLightningModule

STEPS = 3
SCALED_BLOCK = 1
SCALE = 10.0


def reference_groups(name: str, tied: bool) -> list[str]:
    """The groups of docs/architecture.md, spelled out independently of telemetry.group_names."""
    if name.startswith(("tok_emb", "pos_emb")):
        return ["embed"]
    if name.startswith("final_norm"):
        return ["final_norm"]
    if name.startswith("lm_head"):
        return [] if tied else ["head"]
    i, sub = name.split(".")[1:3]
    block = f"block_{int(i):02d}"
    return [block, f"{block}/{'attn' if sub in ('attn', 'attn_norm', 'attn_out_norm') else 'ffn'}"]


class ReferenceNorms(L.Callback):
    """Per-group gradient norms at on_before_optimizer_step (pre-clip), one dict per step."""

    def __init__(self, tied: bool) -> None:
        self.tied = tied
        self.steps: list[dict[str, float]] = []

    def on_before_optimizer_step(self, trainer: L.Trainer, pl_module: Any, optimizer: Any) -> None:
        sq: dict[str, float] = {}
        seen: set[int] = set()
        for name, p in pl_module.model.named_parameters(remove_duplicate=False):
            if id(p) in seen or p.grad is None:
                continue
            seen.add(id(p))
            v = float(torch.linalg.vector_norm(p.grad.double())) ** 2
            for g in ["total", *reference_groups(name, self.tied)]:
                sq[g] = sq.get(g, 0.0) + v
        self.steps.append({g: math.sqrt(v) for g, v in sq.items()})


def random_batches(vocab: int, block: int, batch: int, n: int) -> DataLoader:
    gen = torch.Generator().manual_seed(0)
    data = torch.randint(0, vocab, (n * batch, block + 1), generator=gen)
    return DataLoader(list(data), batch_size=batch)


def train_in_process(
    tmp: Path, n_layer: int, tied: bool, grad_clip: float, placement: str, scale_block: int | None
) -> tuple[list[dict[str, str]], ReferenceNorms]:
    """A few steps in this process; returns the CSV rows and the reference norms."""
    L.seed_everything(0, verbose=False)
    cfg = GPTConfig(
        vocab_size=64,
        block_size=16,
        n_layer=n_layer,
        n_head=2,
        n_embd=32,
        tie_embeddings=tied,
        norm_placement=placement,
    )
    optim = OptimConfig(warmup_steps=1, grad_clip=grad_clip)
    module = GPTLightningModule(model=dataclasses.asdict(cfg), optim=dataclasses.asdict(optim))
    if scale_block is not None:
        # The matrices that read the (normalized) stream: q, k, v, gate, up. Scaling the writers
        # (out_proj, down_proj) too lets the block dominate the residual stream, which moves the
        # other blocks' gradients as much as its own (seen: block_00 x3.7, the scaled block x1.9).
        with torch.no_grad():
            for name, p in module.model.blocks[scale_block].named_parameters():
                if p.dim() >= 2 and not name.endswith(("out_proj.weight", "down_proj.weight")):
                    p.mul_(SCALE)
    reference = ReferenceNorms(tied)
    trainer = L.Trainer(
        accelerator="cpu",
        devices=1,
        max_steps=STEPS,
        log_every_n_steps=1,
        logger=CSVLogger(save_dir=str(tmp), name="csv", version=""),
        callbacks=[LayerTelemetry(every=1, figures=False), reference],
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        limit_val_batches=0,
        num_sanity_val_steps=0,
    )
    trainer.fit(module, train_dataloaders=random_batches(64, 16, 4, STEPS))
    with open(tmp / "csv" / "metrics.csv") as f:
        return list(csv.DictReader(f)), reference


def telemetry_rows(rows: list[dict[str, str]]) -> list[dict[str, float]]:
    """The rows the telemetry callback wrote, values as floats, in step order."""
    out = [{k: float(v) for k, v in r.items() if v != ""} for r in rows if r.get("grad_norm/total")]
    return sorted(out, key=lambda r: r["step"])


@pytest.mark.slow
def test_names_untied_clipped_and_scaled_block_stands_out(tmp_path: Path) -> None:
    n_layer = 4
    rows, ref = train_in_process(
        tmp_path / "scaled", n_layer, tied=False, grad_clip=0.5, placement="pre", scale_block=SCALED_BLOCK
    )
    header = set(rows[0])
    blocks = [f"block_{i:02d}" for i in range(n_layer)]
    expected = {
        "grad_norm/total",
        "grad_norm/embed",
        "grad_norm/final_norm",
        "grad_norm/head",
        "grad_norm/clip_coef",
        "param_norm/total",
        "param_norm/embed",
        "param_norm/final_norm",
        "param_norm/head",
        "act_rms/embed",
        *(f"grad_norm/{b}{s}" for b in blocks for s in ("", "/attn", "/ffn")),
        *(f"param_norm/{b}" for b in blocks),
        *(f"update_ratio/{b}" for b in blocks),
        *(f"act_rms/{b}" for b in blocks),
    }
    assert expected <= header, sorted(expected - header)
    # exactly n_layer blocks: no block_04, nothing unpadded
    for prefix in ("grad_norm", "param_norm", "update_ratio", "act_rms"):
        found = {m.group(1) for k in header if (m := re.fullmatch(prefix + r"/block_(\d+)(?:/\w+)?", k))}
        assert found == {f"{i:02d}" for i in range(n_layer)}, (prefix, found)

    logged = telemetry_rows(rows)
    assert [int(r["step"]) for r in logged] == list(range(STEPS))
    assert len(ref.steps) == STEPS
    for row, want in zip(logged, ref.steps, strict=True):
        for group, value in want.items():
            assert row[f"grad_norm/{group}"] == pytest.approx(value, rel=1e-5), (row["step"], group)
        assert row["grad_norm/clip_coef"] == pytest.approx(min(1.0, 0.5 / want["total"]), rel=1e-5)
    assert any(r["grad_norm/clip_coef"] < 1.0 for r in logged)  # 0.5 does clip here

    # the scaled block stands out in its own entry, against the same run without the scaling
    plain_rows, _ = train_in_process(
        tmp_path / "plain", n_layer, tied=False, grad_clip=0.5, placement="pre", scale_block=None
    )
    first_scaled, first_plain = logged[0], telemetry_rows(plain_rows)[0]
    ratios = {b: first_scaled[f"grad_norm/{b}"] / first_plain[f"grad_norm/{b}"] for b in blocks}
    target = f"block_{SCALED_BLOCK:02d}"
    others = [r for b, r in ratios.items() if b != target]
    assert max(ratios, key=ratios.get) == target, ratios
    assert ratios[target] > 3 * max(others), ratios


@pytest.mark.slow
def test_names_tied_unclipped_post_norm(tmp_path: Path) -> None:
    rows, ref = train_in_process(
        tmp_path, n_layer=2, tied=True, grad_clip=0.0, placement="post", scale_block=None
    )
    header = set(rows[0])
    # tied: no head; post-norm: no final norm; no clipping: no clip_coef
    for absent in ("grad_norm/head", "grad_norm/final_norm", "grad_norm/clip_coef", "param_norm/head"):
        assert absent not in header
    assert {"grad_norm/block_01/ffn", "update_ratio/block_01", "act_rms/block_01"} <= header
    assert "grad_norm/block_02" not in header
    for row, want in zip(telemetry_rows(rows), ref.steps, strict=True):
        for group, value in want.items():
            assert row[f"grad_norm/{group}"] == pytest.approx(value, rel=1e-5), (row["step"], group)
