"""1 process vs 2-process DDP vs 2-process FSDP2, same seed, same global batch: same training.

train/loss is the global mean on logged steps (the module all-reduces it there), so the three
runs must agree step by step; the telemetry's grad norms are over the global gradient (DDP
replicas counted once, FSDP shards summed), so every grad_norm/* column must agree too, and so must
every other telemetry family: attn_logit_max/* (a MAX all-reduce), attn_entropy/* and logits/*
(token-weighted over ranks), update_rms/*, act_rms/*.
The DDP run checkpoints every block and the FSDP run block 0 of 2 (model.activation_checkpointing
full / selective; conftest.py), the single process none: recomputation changes no value either.
Differences come only from float32 summation order (one batch of 4 vs two of 2 and an all-reduce):
~1e-7 relative at step 0, growing slowly through AdamW; the tolerances leave room for 10 steps.

Validation scores data.val_windows=5 windows spread over the val split: 3 + 2 on two ranks, the
second padded with a weight-0 window, each rank running the same batches. Every run's val/loss is
the token mean over those 5 windows; evaluate.py on a run's checkpoint must give that run's final
val/loss to 1e-6 (one process, the same windows, the same sum / count).

Every run scores a 7-item task at each validation (callbacks.tasks, helpers.TASKS): under DDP and
FSDP2 each rank scores its share and the log-likelihoods are gathered; the final numbers must equal
evaluate.py's task scoring of the run's last checkpoint in one process, and plain torch on it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from gptlab.checkpoints import load_gpt
from gptlab.evaluation.run import evaluate_tasks
from tests.interop.helpers import load_cli

from .helpers import (
    BLOCK,
    GLOBAL_BATCH,
    GRAD_CLIP,
    STEPS,
    TASK_BATCH,
    TASKS,
    Run,
    read_metrics,
    series,
    torchrun_job_dir,
)

pytestmark = [pytest.mark.multiproc, pytest.mark.slow]
LOSS_RTOL = 1e-5
GRAD_RTOL = 1e-4
# every telemetry family: the optimizer side (norms over the global gradient and weights) and the
# forward side (attention logits and entropy, output logits, stream RMS over the global batch)
TELEMETRY = (
    "grad_norm/",
    "param_norm/",
    "update_ratio/",
    "update_rms/",
    "act_rms/",
    "attn_logit_max/",
    "attn_entropy/",
    "logits/",
)
VAL_ABS = 1e-6


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

    names = sorted({k for m in ref.values() for k in m if k.startswith(TELEMETRY)})
    assert names == sorted({k for m in got.values() for k in m if k.startswith(TELEMETRY)})
    assert "grad_norm/clip_coef" in names and "grad_norm/block_01/ffn" in names
    # the forward-side signals: a max is MAX-reduced, entropy and logit moments token-weighted
    for key in ("attn_logit_max/block_01", "attn_entropy/block_00", "logits/max", "logits/log_z_mean"):
        assert key in names, key
    assert "update_rms/block_01" in names and "act_rms/block_01" in names
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


def _job0(sweep_run: Run) -> Path:
    return Path(sweep_run.cmd[-1].split("=", 1)[1]) / "0"  # hydra.sweep.dir=<dir>


def _layouts(single_run: Path, sweep_run: Run, torchrun_run: Run) -> dict[str, Path]:
    sweep_run.check()
    torchrun_run.check()
    return {"single": single_run, "ddp": _job0(sweep_run), "fsdp": torchrun_job_dir(torchrun_run)}


def test_val_loss_is_the_same_on_every_layout(single_run: Path, sweep_run: Run, torchrun_run: Run) -> None:
    runs = _layouts(single_run, sweep_run, torchrun_run)
    ref = series(read_metrics(single_run), "val/loss")
    assert len(ref) >= 2, ref  # validations at steps 4 and 8 (and the end)
    for label, run_dir in runs.items():
        got = series(read_metrics(run_dir), "val/loss")
        assert list(got) == list(ref), label
        for step, value in ref.items():
            assert got[step] == pytest.approx(value, abs=VAL_ABS), (label, step, got[step] - value)


def _evaluable(label: str, ckpt: Path, out: Path) -> Path:
    """The checkpoint as evaluate.py reads it: FSDP's sharded directory consolidated first (in this
    process, scripts/consolidate.py's main; its command line is test_fsdp_checkpoint.py's)."""
    if not ckpt.is_dir():
        return ckpt
    target = out / f"{label}.pt"
    assert load_cli("scripts/consolidate.py").main([str(ckpt), str(target)]) == 0
    return target


def _ckpt_step(ckpt: Path) -> int:
    state = torch.load(ckpt / "meta.pt" if ckpt.is_dir() else ckpt, weights_only=True, map_location="cpu")
    return int(state["global_step"])


@pytest.fixture(scope="module")
def final_ckpts(
    single_run: Path, sweep_run: Run, torchrun_run: Run, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, tuple[Path, Path]]:
    """label -> (run dir, its last checkpoint as evaluate.py reads it), FSDP's consolidated once."""
    out = tmp_path_factory.mktemp("evaluable")
    return {
        label: (run_dir, _evaluable(label, run_dir / "checkpoints" / "last.ckpt", out))
        for label, run_dir in _layouts(single_run, sweep_run, torchrun_run).items()
    }


def test_evaluate_py_gives_each_runs_final_val_loss(
    final_ckpts: dict[str, tuple[Path, Path]], cache: Path
) -> None:
    evaluate = load_cli("evaluate.py")
    data = [f"data.cache_dir={cache}", "data.max_bytes=200000", "data.val_windows=5"]
    for label, (run_dir, evaluable) in final_ckpts.items():
        ckpt = run_dir / "checkpoints" / "last.ckpt"
        assert _ckpt_step(ckpt) == STEPS, label
        val = series(read_metrics(run_dir), "val/loss")
        final_step = max(val)
        assert final_step == STEPS - 1, (label, val)  # the final validation, on last.ckpt's weights
        args = evaluate.parse_args([f"ckpt_path={evaluable}"])
        got = evaluate.evaluate(args, data)
        assert got["tokens"] == 5 * BLOCK, label
        want = val[final_step]
        assert got["loss"] == pytest.approx(want, abs=VAL_ABS), (label, got["loss"] - want)


def _task_oracle(model: torch.nn.Module, rows: list[dict]) -> dict[str, float]:
    """acc, acc_norm (per UTF-8 byte) and bpb of plain {context, choices, answer} rows: log_softmax
    over each context + choice's bytes, the sequence cut to its last BLOCK + 1 bytes."""
    acc = acc_norm = 0
    bits, n_bytes = 0.0, 0
    for row in rows:
        context, choices, label = row["context"], row["choices"], row["answer"]
        assert context == context.rstrip()  # no trailing whitespace to move to the continuation
        lls = []
        for choice in choices:
            ids = list((context + choice).encode())[-(BLOCK + 1) :]
            n = len(choice.encode())
            with torch.no_grad():
                logp = torch.log_softmax(model(torch.tensor([ids[:-1]])).double(), dim=-1)[0]
            lls.append(sum(float(logp[p - 1, ids[p]]) for p in range(len(ids) - n, len(ids))))
        per_byte = [ll / len(c.encode()) for ll, c in zip(lls, choices, strict=True)]
        acc += max(range(len(lls)), key=lls.__getitem__) == label
        acc_norm += max(range(len(lls)), key=per_byte.__getitem__) == label
        bits -= lls[label] / math.log(2)
        n_bytes += len(choices[label].encode())
    return {"acc": acc / len(rows), "acc_norm": acc_norm / len(rows), "bpb": bits / n_bytes}


def test_tasks_scored_over_ranks_equal_one_process_and_plain_torch(
    final_ckpts: dict[str, tuple[Path, Path]],
) -> None:
    """callbacks.tasks under DDP and FSDP2 (each rank scores its share of the 7 items, the
    log-likelihoods gathered) equals evaluate.py's task scoring of the run's last checkpoint in one
    process, and plain torch on that checkpoint; scored at every validation (every_n_steps=null)."""
    rows = [json.loads(line) for line in TASKS.read_text().splitlines()]
    name = TASKS.stem
    for label, (run_dir, ckpt) in final_ckpts.items():
        metrics = read_metrics(run_dir)
        assert list(series(metrics, f"task/{name}/acc")) == list(series(metrics, "val/loss")), label
        (one,) = evaluate_tasks(str(ckpt), str(TASKS), TASK_BATCH, torch.device("cpu"))["tasks"]
        want = _task_oracle(load_gpt(ckpt), rows)
        final = json.loads((run_dir / "metrics.json").read_text())["tasks"][name]
        assert (final["items"], final["step"]) == (len(rows), STEPS), label
        for key in ("acc", "acc_norm", "bpb"):
            logged = series(metrics, f"task/{name}/{key}")[STEPS - 1]  # float32 in the CSV
            assert final[key] == pytest.approx(one[1][key], rel=1e-6, abs=1e-9), (label, key)
            assert final[key] == pytest.approx(want[key], rel=1e-5, abs=1e-9), (label, key)
            assert logged == pytest.approx(final[key], rel=1e-6, abs=1e-7), (label, key)
