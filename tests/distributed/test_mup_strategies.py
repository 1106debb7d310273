"""μP under the strategies (issue 32): one process, 2-process DDP with every block checkpointed and
2-process FSDP2 (torchrun) with selective checkpointing train the same μP model the same way, step by
step (the optimizer's μP groups are built from parameter names, which DDP, FSDP2 and checkpointing
keep); and that training is not SP's (the μP rules are in force in every one of them).

The μP runs go through tests/distributed/ranks.py (the app as train.py runs it: the one process in
the test's own, both two-rank runs on the ranks spawned once for the session's equality runs);
FSDP2 under torchrun is test_equivalence.py's."""

from __future__ import annotations

from pathlib import Path

import pytest

from .helpers import GLOBAL_BATCH, STEPS, TWO_CPU, common, read_metrics, series
from .ranks import train_once

pytestmark = [pytest.mark.multiproc, pytest.mark.slow]
MUP = ["model/parametrization=mup", "model.mup_base_width=16", "model.n_layer=2"]


def two_rank_jobs(cache: Path) -> dict[str, list[str]]:
    """This module's two-rank runs, made on the session's spawned ranks (conftest.spawned_runs)."""
    both = [*MUP, *common(cache), *TWO_CPU, "logger=csv"]
    return {
        "ddp": [*both, "model.activation_checkpointing=full"],
        "fsdp": [*both, "trainer=fsdp", "model.activation_checkpointing=selective"],
    }


@pytest.fixture(scope="module")
def runs(
    tmp_path_factory: pytest.TempPathFactory, single_run: Path, cache: Path, spawned_runs: dict[str, Path]
) -> dict[str, Path]:
    """SP's run is the session's single-process reference (conftest.single_run: these overrides
    without MUP); the one-process μP run is made here."""
    mup = tmp_path_factory.mktemp("mup_dist") / "mup"
    single = [*common(cache), f"data.batch_size={GLOBAL_BATCH}", "trainer.accelerator=cpu",
              "trainer.devices=1", "logger=csv"]  # fmt: skip
    train_once(mup, [*single, *MUP])
    return {"mup": mup, "sp": single_run} | {name: spawned_runs[f"mup/{name}"] for name in ("ddp", "fsdp")}


def test_ddp_and_fsdp2_train_the_mup_model_as_one_process_does(runs: dict[str, Path]) -> None:
    ref = read_metrics(runs["mup"])
    for name in ("ddp", "fsdp"):
        got = read_metrics(runs[name])
        for key in ("train/loss", "attn_logit_max/block_01", "logits/max"):
            a, b = series(ref, key), series(got, key)
            assert list(a) == list(b) == list(range(STEPS)), (name, key)
            for step in a:
                assert b[step] == pytest.approx(a[step], rel=1e-4), (name, key, step)


def test_the_mup_runs_are_not_sp(runs: dict[str, Path]) -> None:
    sp, mup = series(read_metrics(runs["sp"]), "train/loss"), series(read_metrics(runs["mup"]), "train/loss")
    assert sp[0] != pytest.approx(mup[0], rel=1e-3)  # the logits × 1/4 at init already
    assert abs(sp[STEPS - 1] - mup[STEPS - 1]) > 1e-3
