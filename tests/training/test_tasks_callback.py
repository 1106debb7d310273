"""Downstream tasks in the loop (callbacks.tasks): logged numbers against plain torch on the run's own
weights, the cadence, and a training run the evaluation leaves exactly as it was.

One tiny run with two task files (a plain and a HellaSwag one) is shared by the module: 7 steps,
validations after steps 3, 6 and 7 (the final one), callbacks.tasks.every_n_steps=5, so the tasks are
scored after steps 6 (the first validation at or after step 5) and 7 (the final validation), never in
the sanity check. A second run without tasks must train bit for bit the same (dropout on: an
evaluation that drew from the RNG or left the model in eval mode would change the losses).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import pytest
import torch

from gptlab.checkpoints import load_gpt
from tests.tasks.test_evaluate_tasks import PLAIN as EVALUATE_PLAIN
from tests.training.rel_harness import csv_rows, series, train_here, with_callbacks

BLOCK = 32  # rel_harness.TINY's model.block_size
PLAIN = [*EVALUATE_PLAIN, {"context": "if x is", "choices": [" None:", " not None:"], "answer": 0}]
HELLASWAG = [
    {"ctx": "The return value of len(", "endings": ["x) is an int.", "[title] y", "z)"], "label": "0"},
    {"ctx": "x" * 40 + " for i in", "endings": ["range(10):", "i:"], "label": 0},
]
STEPS, EVERY = 7, 5
TASKED = ["callbacks.tasks.every_n_steps=5", "callbacks.tasks.batch_size=3"]
COMMON = [f"trainer.max_steps={STEPS}", "trainer.val_check_interval=3", "model.dropout=0.1"]


class Probe(L.Callback):
    """Records the TaskEvaluation's evaluated steps and skipped tasks, and the model's mode at every
    training batch."""

    def __init__(self) -> None:
        self.evaluations: list[int] = []
        self.skipped: dict[str, str] = {}
        self.modes: list[bool] = []

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: Any, batch: Any, i: int) -> None:
        self.modes.append(pl_module.model.training)

    def on_train_end(self, trainer: L.Trainer, pl_module: Any) -> None:
        found = [c for c in trainer.callbacks if type(c).__name__ == "TaskEvaluation"]
        assert len(found) <= 1
        for tasks in found:  # none when callbacks.tasks.names is empty
            self.evaluations = list(tasks.evaluations)
            self.skipped = dict(tasks.skipped)


def write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, cache: Path) -> dict[str, Any]:
    """The tasked run (with its probe), the same run without tasks, a run at every validation, and a
    one-step run on token ids without a tokenizer, whose data cannot give the default task
    (val_continuation finds documents at end-of-text ids): skipped with its reason."""
    root = tmp_path_factory.mktemp("tasks_cb")
    plain, hs = write(root / "code.jsonl", PLAIN), write(root / "hs_tiny.jsonl", HELLASWAG)
    ids = root / "ids.bin"
    np.random.default_rng(0).integers(0, 256, 20_000).astype(np.uint16).tofile(ids)
    probes = {"tasked": Probe(), "plain": Probe(), "every": Probe(), "skipped": Probe()}
    every = [f"callbacks.tasks.names=[{hs}]", "callbacks.tasks.every_n_steps=null"]
    ids_data = ["data=tokens", f"data.path={ids}", "data.token_dtype=uint16", "data.vocab_size=256"]
    configs = {
        "tasked": [*COMMON, *TASKED, f"callbacks.tasks.names=[{plain},{hs}]"],
        "plain": [*COMMON, "callbacks.tasks.names=[]"],
        "every": ["trainer.max_steps=3", "trainer.val_check_interval=1", *every],  # a validation a step
        "skipped": ["trainer.max_steps=1", *ids_data, "callbacks.tasks.names=[val_continuation]"],
    }
    out = {}
    for name, overrides in configs.items():
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("WANDB_MODE", "disabled")
            with_callbacks(mp, probes[name])
            torch.manual_seed(len(name))  # the run seeds itself: nothing outside it matters
            out[name] = train_here(root / name, cache, *overrides)
    return {"root": root, **out, "probe": probes["tasked"], "probes": probes}


def oracle_loglikelihood(model: torch.nn.Module, context: str, continuation: str) -> float:
    """Σ log p(continuation bytes | context): plain log_softmax over the concatenated bytes, the
    context's trailing whitespace counted as the continuation's (lm-eval's split), the sequence cut to
    its last block+1 bytes."""
    ids = list((context + continuation).encode())
    n_cont = len(ids) - len(context.rstrip().encode())
    ids = ids[-(BLOCK + 1) :]
    with torch.no_grad():
        logp = torch.log_softmax(model(torch.tensor([ids[:-1]])).double(), dim=-1)[0]
    return sum(float(logp[p - 1, ids[p]]) for p in range(len(ids) - n_cont, len(ids)))


def oracle(model: torch.nn.Module, items: list[tuple[str, str, list[str], int]]) -> dict[str, float]:
    """acc, acc_norm (per UTF-8 byte of the choice) and bpb of (context, delimiter, choices, label)."""
    acc = acc_norm = 0
    bits, n_bytes = 0.0, 0
    for context, delimiter, choices, label in items:
        lls = [oracle_loglikelihood(model, context, delimiter + c) for c in choices]
        per_byte = [ll / len(c.encode()) for ll, c in zip(lls, choices, strict=True)]
        acc += max(range(len(lls)), key=lls.__getitem__) == label
        acc_norm += max(range(len(lls)), key=per_byte.__getitem__) == label
        bits -= lls[label] / math.log(2)
        n_bytes += len((context + delimiter + choices[label]).encode()) - len(context.rstrip().encode())
    n = len(items)
    return {"acc": acc / n, "acc_norm": acc_norm / n, "bpb": bits / n_bytes}


def expected(run_dir: Path) -> dict[str, dict[str, float]]:
    """Both tasks scored by the oracle on the run's last checkpoint (the final validation's weights)."""
    model = load_gpt(run_dir / "checkpoints" / "last.ckpt")
    plain = [(r["context"], "", r["choices"], r["answer"]) for r in PLAIN]
    # HellaSwag as lm-eval preprocesses it: ' [title]' -> '. ', a space before each ending
    hs = [
        ("The return value of len(", " ", ["x) is an int.", ". y", "z)"], 0),
        ("x" * 40 + " for i in", " ", ["range(10):", "i:"], 0),
    ]
    return {"code": oracle(model, plain), "hs_tiny": oracle(model, hs)}


def test_logged_numbers_equal_plain_torch_on_the_last_checkpoint(runs: dict[str, Any]) -> None:
    run_dir = runs["root"] / "tasked"
    want = expected(run_dir)
    tasks = runs["tasked"]["tasks"]
    on_disk = json.loads((run_dir / "metrics.json").read_text())["tasks"]
    assert on_disk == tasks
    assert sorted(tasks) == ["code", "hs_tiny"]
    for name, w in want.items():
        got = tasks[name]
        assert (got["items"], got["step"]) == ({"code": 5, "hs_tiny": 2}[name], STEPS)
        assert got["chance"] == pytest.approx(
            {"code": (1 / 3 + 1 / 2 + 1 / 3 + 1 / 2 + 1 / 2) / 5, "hs_tiny": (1 / 3 + 1 / 2) / 2}[name]
        )
        for key in ("acc", "acc_norm", "bpb"):
            assert got[key] == pytest.approx(w[key], rel=1e-5, abs=1e-9), (name, key)
            logged = series(run_dir, f"task/{name}/{key}")
            # the CSV holds float32: the final validation's row is step index STEPS - 1
            assert logged[STEPS - 1] == pytest.approx(w[key], rel=1e-5, abs=1e-7), (name, key)
    # the acc values are not all trivial: some right, some wrong
    assert 0 < tasks["code"]["acc"] < 1 or 0 < tasks["code"]["acc_norm"] < 1


def test_cadence_every_n_steps_and_the_final_validation_not_the_sanity_check(runs: dict[str, Any]) -> None:
    run_dir = runs["root"] / "tasked"
    val_steps = sorted(series(run_dir, "val/loss"))
    assert val_steps == [2, 5, 6]  # validations after steps 3, 6, 7
    for key in ("task/code/acc", "task/hs_tiny/bpb"):
        assert sorted(series(run_dir, key)) == [5, 6], key  # after steps 6 (>= 5) and 7 (final)
    assert runs["probe"].evaluations == [6, 7]  # the sanity check's validation scored nothing
    # every_n_steps=null: every validation, and still not the sanity check (at step 0)
    assert runs["probes"]["every"].evaluations == [1, 2, 3]
    assert sorted(series(runs["root"] / "every", "task/hs_tiny/acc")) == [0, 1, 2]
    # the two evaluations were of different weights (the first is not the one kept)
    bpb = series(run_dir, "task/code/bpb")
    assert bpb[5] != bpb[6]


def test_the_evaluation_changes_nothing_in_training(runs: dict[str, Any]) -> None:
    tasked, plain = runs["root"] / "tasked", runs["root"] / "plain"
    assert runs["probe"].modes == [True] * STEPS  # every training step ran in train mode
    assert series(tasked, "train/loss") == series(plain, "train/loss")  # bit for bit (CPU)
    assert series(tasked, "val/loss") == series(plain, "val/loss")
    assert runs["probes"]["plain"].evaluations == [] and runs["plain"]["tasks"] == {}
    assert not [k for r in csv_rows(plain) for k in r if k.startswith("task/")]


def test_a_builtin_task_the_data_cannot_give_is_skipped_with_its_reason(runs: dict[str, Any]) -> None:
    probe = runs["probes"]["skipped"]
    assert list(probe.skipped) == ["val_continuation"]
    assert "finds the val documents at end-of-text ids" in probe.skipped["val_continuation"]
    assert probe.evaluations == [] and runs["skipped"]["tasks"] == {}
    assert runs["skipped"]["status"] == "finished"


def test_a_resumed_run_keeps_the_cadence(tmp_path: Path, cache: Path) -> None:
    """every_n_steps=4, a validation every 2 steps. The first attempt stops at step 5 (its final
    validation scores: 4 and 5); resumed to step 8 it must not score at step 6 (6 // 4 == 5 // 4: the
    last evaluation, restored from the checkpoint, was in that window), only at the final step 8."""
    hs = write(tmp_path / "hs_tiny.jsonl", HELLASWAG)
    tasked = [
        f"callbacks.tasks.names=[{hs}]",
        "callbacks.tasks.every_n_steps=4",
        "trainer.val_check_interval=2",
    ]
    probes = {"first": Probe(), "resumed": Probe()}
    last = tmp_path / "first" / "checkpoints" / "last.ckpt"
    for name, extra in (
        ("first", ["trainer.max_steps=5"]),
        ("resumed", ["trainer.max_steps=8", f"ckpt_path={last}"]),
    ):
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("WANDB_MODE", "disabled")
            with_callbacks(mp, probes[name])
            train_here(tmp_path / name, cache, *tasked, *extra)
    assert probes["first"].evaluations == [4, 5]
    assert probes["resumed"].evaluations == [8]
