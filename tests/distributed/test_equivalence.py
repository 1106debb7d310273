"""1 process vs 2-process DDP vs 2-process FSDP2, same seed, same global batch: same training.

train/loss is the global mean on logged steps (the module all-reduces it there), so the three
runs must agree step by step; the telemetry's grad norms are over the global gradient (DDP
replicas counted once, FSDP shards summed), so every grad_norm/* column must agree too.
Differences come only from float32 summation order (one batch of 4 vs two of 2 and an all-reduce):
~1e-7 relative at step 0, growing slowly through AdamW; the tolerances leave room for 10 steps.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .helpers import (
    BLOCK,
    GLOBAL_BATCH,
    GRAD_CLIP,
    STEPS,
    Run,
    read_metrics,
    series,
    torchrun_job_dir,
)

pytestmark = [pytest.mark.multiproc, pytest.mark.slow]
LOSS_RTOL = 1e-5
GRAD_RTOL = 1e-4


def _compare(reference: Path, other: Path, label: str) -> None:
    ref, got = read_metrics(reference), read_metrics(other)
    ref_loss, got_loss = series(ref, "train/loss"), series(got, "train/loss")
    assert list(ref_loss) == list(range(STEPS))
    assert list(got_loss) == list(range(STEPS)), label
    for step, value in ref_loss.items():
        assert got_loss[step] == pytest.approx(value, rel=LOSS_RTOL), (label, "train/loss", step)

    # the same number of tokens per step: 2 processes x 2 windows = 1 process x 4 windows
    for step, value in series(ref, "tokens_seen").items():
        assert got[step]["tokens_seen"] == value == (step + 1) * GLOBAL_BATCH * BLOCK, (label, step)

    names = sorted({k for m in ref.values() for k in m if k.startswith("grad_norm/")})
    assert names == sorted({k for m in got.values() for k in m if k.startswith("grad_norm/")})
    assert "grad_norm/clip_coef" in names and "grad_norm/block_01/ffn" in names
    for name in names:
        want, have = series(ref, name), series(got, name)
        assert list(have) == list(want) == list(range(STEPS)), (label, name)
        for step, value in want.items():
            assert have[step] == pytest.approx(value, rel=GRAD_RTOL), (label, name, step)


def test_single_process_clips_on_some_steps_only(single_run: Path) -> None:
    """The comparison covers both branches of clipping: clip_coef < 1 and == 1."""
    coef = series(read_metrics(single_run), "grad_norm/clip_coef")
    total = series(read_metrics(single_run), "grad_norm/total")
    assert len(coef) == STEPS
    for step, c in coef.items():
        assert c == pytest.approx(min(1.0, GRAD_CLIP / (total[step] + 1e-6)), rel=1e-6)
    assert any(c < 1.0 for c in coef.values()) and any(c == 1.0 for c in coef.values()), coef


def test_ddp_matches_single_process(single_run: Path, sweep_run: Run) -> None:
    sweep_run.check()
    job0 = Path(sweep_run.cmd[-1].split("=", 1)[1]) / "0"  # hydra.sweep.dir=<dir>
    assert "model.n_layer=2" in (job0 / ".hydra" / "overrides.yaml").read_text()
    _compare(single_run, job0, "ddp")


def test_fsdp_matches_single_process(single_run: Path, torchrun_run: Run) -> None:
    torchrun_run.check()
    _compare(single_run, torchrun_job_dir(torchrun_run), "fsdp")
