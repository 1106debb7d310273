"""scripts/plan.py's command line in-process: a plan printed; bad input one line, exit 2."""

from __future__ import annotations

import pytest

from gptlab.hardware import GPUS, lookup
from gptlab.planning.cli import main

TINY = [
    "model=pre_rmsnorm_swiglu",
    "model.n_layer=1",
    "model.n_embd=48",
    "model.n_head=4",
    "model.block_size=32",
]


def one_line_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("error: "), err
    return err


def test_unknown_gpu_lists_the_known_ones(capsys: pytest.CaptureFixture[str]) -> None:
    err = one_line_error(capsys, [*TINY, "plan.gpu=B300"])
    assert "B300" in err
    for name in GPUS:
        assert name in err


def test_gpu_names_as_typed() -> None:
    assert lookup("H200").name == "H200"
    assert lookup("h100").name == "H100 SXM"
    assert lookup("A100-40GB").name == "A100 40GB"
    assert lookup("NVIDIA H100 PCIe").name == "H100 PCIe"  # a CUDA device name works too
    assert lookup("rtx4090").memory_gib == 24


def test_missing_gpu_and_bad_option(capsys: pytest.CaptureFixture[str]) -> None:
    assert "plan.gpu is required" in one_line_error(capsys, TINY)
    assert "plan.mfu" in one_line_error(capsys, [*TINY, "plan.gpu=H200", "plan.mfu=40"])
    assert "plan.bogus" in one_line_error(capsys, [*TINY, "plan.gpu=H200", "plan.bogus=1"])


@pytest.mark.parametrize(
    "override, key",
    [
        ("data.batch_size=0", "data.batch_size=0"),
        ("trainer.accumulate_grad_batches=0", "trainer.accumulate_grad_batches=0"),
        ("trainer.num_nodes=0", "trainer.devices × trainer.num_nodes=0"),
    ],
)
def test_a_zero_size_is_one_line_before_any_fake_step(
    capsys: pytest.CaptureFixture[str], override: str, key: str
) -> None:
    """These crashed with a ZeroDivisionError traceback after a fake step of zero sequences."""
    err = one_line_error(capsys, [*TINY, override, "plan.gpu=H200"])
    assert key in err and "positive integer" in err, err


def test_a_config_that_fits_no_listed_gpu_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    """The fp32 logits alone of 512 × 4096 positions × 32,000 ids are 250 GiB: beyond an H200."""
    argv = [*TINY[:-1], "model.block_size=4096", "model.vocab_size=32000", "data.batch_size=512"]
    err = one_line_error(capsys, [*argv, "plan.gpu=RTX 4090"])
    assert "no listed GPU" in err and "H200" in err and "GiB" in err
    peak = float(err.split("needs ")[1].split(" GiB")[0])
    assert peak > 250


def test_a_plan_is_printed(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*TINY, "data.batch_size=4", "plan.gpu=H200", "plan.tokens=1e9", "plan.mfu=0.4"]) == 0
    out = capsys.readouterr().out
    for what in (
        "parameters",
        "activations",
        "optimizer",
        "peak",
        "FLOP/token",
        "tokens/s",
        "fits:",
        "1e+09",
    ):
        assert what in out, what


def test_a_grouped_query_plan_names_its_key_value_heads(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*TINY, "model/attention=gqa", "data.batch_size=4", "plan.gpu=H200", "plan.mfu=0.4"]) == 0
    assert "4 heads (2 key/value)" in capsys.readouterr().out
    err = one_line_error(capsys, [*TINY, "model.n_kv_head=0", "plan.gpu=H200"])
    assert "model.n_kv_head=0 is not accepted with model.n_head=4" in err


def test_a_muon_plan_names_its_optimizer_and_fsdp_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    """optim=muon is planned as the run builds it and says so; with FSDP2 it is refused as train.py
    refuses it (docs/bad-inputs.md), one line, exit 2."""
    assert main([*TINY, "optim=muon", "data.batch_size=4", "plan.gpu=H200", "plan.mfu=0.4"]) == 0
    assert "\noptimizer  muon: torch.optim.Muon on the hidden matrices" in capsys.readouterr().out
    err = one_line_error(capsys, [*TINY, "optim=muon", "trainer=fsdp", "trainer.devices=2", "plan.gpu=H200"])
    assert "optim.name=muon cannot be combined with trainer.strategy=fsdp" in err


@pytest.mark.slow  # three fake steps of the default preset: 15-50 s on the loaded 2-core machine
@pytest.mark.parametrize(
    ("mode", "activations", "peak"),
    [
        ("none", "168.4 MiB", "186.6 MiB"),
        ("full", "40.1 MiB", "70.6 MiB"),
        ("selective", "92.2 MiB", "110.4 MiB"),
    ],
)
def test_documented_checkpointing_numbers(
    capsys: pytest.CaptureFixture[str], mode: str, activations: str, peak: str
) -> None:
    """docs/performance.md, Planning: the default preset's figures, as the documented commands print them."""
    argv = ["trainer.precision=32-true", f"model.activation_checkpointing={mode}", "plan.gpu=H200"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: " ".join(line.split()[1:]) for line in out.splitlines() if line.startswith("  ")}
    assert rows["activations"] == activations
    assert rows["peak"] == peak


def test_table_rows_format() -> None:
    """The sizing table's formatting, on hand-made rows: a fitting row, one that fits at no size."""
    from gptlab.planning.table import Row, format_rows

    fit = Row(
        "m", "1×H200", "none", 124_000_000, 12, 60.0, 126.9, 0.5, 49152.0, 10e9 / 49152 / 86400, 0.35, "src A"
    )
    none = Row("big", "1×H200", "none", 6_700_000_000, None, 150.2, 126.9, None, None, None, None, "")
    text = format_rows([fit, none])
    lines = text.splitlines()
    assert lines[2].split("|")[5].strip() == "12" and "0.350 [1]" in lines[2]
    assert "none (1 needs more)" in lines[3] and "150.2 at 1" in lines[3]
    assert "[1] src A" in text


def test_the_tasks_scoring_forward_is_planned_at_the_tasks_length() -> None:
    """val_continuation's requests are its 64 + 16 tokens (evaluation/val_task.py), a task file's up to
    the block (unknown until read); the longest of the run's tasks, never past block_size."""
    from gptlab.evaluation.val_task import DEFAULT
    from gptlab.planning.options import task_tokens

    builtin = DEFAULT.context_tokens + DEFAULT.continuation_tokens
    assert builtin == 80
    assert task_tokens(["val_continuation"], 256) == 80
    assert task_tokens(["val_continuation"], 32) == 32
    assert task_tokens(["val_continuation", "mine.jsonl"], 256) == 256
    assert task_tokens([], 256) == 0
