"""scripts/bench.py: option parsing, the table's arithmetic, and a 2-step end-to-end run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gptlab.bench.options import BARE, LIGHTNING, compose, parse_args
from gptlab.bench.result import BenchResult, Run
from gptlab.bench.run import run_bench
from gptlab.bench.table import format_table
from gptlab.bench.timing import window_times
from gptlab.config import BenchOptions
from tests.conftest import run_script

COLUMNS = ("variant", "tokens/s", "step ms", "p50 ms", "MFU", "peak mem", "faults/step", "CPU ms/step")


def test_parse_args_splits_bench_options_from_hydra_overrides() -> None:
    opts, overrides = parse_args(["model=gpt2", "bench.steps=20", "bench.variants=bare,lightning", "x.y=1"])
    assert overrides == ["model=gpt2", "x.y=1"]
    assert opts.steps == 20 and opts.variants == (BARE, LIGHTNING)


@pytest.mark.parametrize(
    "arg, message",
    [
        ("bench.stepz=3", "bench.<field>"),
        ("bench.steps=0", "bench.steps=0"),
        ("bench.steps=ten", "must be an integer"),
        ("bench.variants=bare,fast", "is not accepted"),
        ("bench.tokenize=maybe", "true or false"),
    ],
)
def test_bad_options_name_the_field(arg: str, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace(".", r"\.").replace("<", ".").replace(">", ".")):
        parse_args([arg])


def test_window_times_start_after_warmup() -> None:
    steps, window = window_times([0.0, 5.0, 6.0, 8.0, 11.0], warmup=2, steps=3)
    assert steps == [1.0, 2.0, 3.0]  # from the end of the last warm-up step (5.0) on
    assert window == 6.0
    with pytest.raises(RuntimeError):
        window_times([0.0, 1.0], warmup=2, steps=3)


def _result() -> BenchResult:
    r = BenchResult(
        model={
            "n_layer": 2,
            "n_embd": 8,
            "n_head": 2,
            "block_size": 4,
            "vocab_size": 16,
            "norm_placement": "pre",
            "norm": "rmsnorm",
            "ffn": "swiglu",
            "tie_embeddings": True,
            "pos_emb": "rope",
            "num_params": 1000,
        },
        setup={
            "device": "cpu",
            "threads": 1,
            "precision": "32-true",
            "compile": False,
            "batch_size": 25,
            "tokens_per_step": 100,
            "warmup": 1,
            "steps": 2,
            "repeats": 2,
            "variants": [BARE, LIGHTNING, "lightning+telemetry/10"],
            "log_every_n_steps": 10,
            "progress_bar": True,
            "progress_refresh_rate": 10,
            "loggers": ["csv"],
            "num_workers": 0,
            "torch": "x",
            "lightning": "y",
        },
        flops_per_token=1000,
        n_params_flops=100,
        peak_flops=1e6,
        peak_source="measured",
        peak_samples=[1e6],
    )
    # wall: bare 1.0 s, lightning 1.02 s, telemetry 1.0404 s for 2 steps of 100 tokens; CPU time:
    # 0.9 s for all three (the wall-clock difference was other processes taking the core)
    for k, scale in ((0, 1.0), (1, 2.0)):  # round 1: the machine was twice as slow for everyone
        for variant, window in ((BARE, 1.0), (LIGHTNING, 1.02), ("lightning+telemetry/10", 1.0404)):
            w = window * scale
            hooks = (
                0.0045 * scale if variant == "lightning+telemetry/10" else 0.0
            )  # 0.5% of a step (median of rounds)
            r.runs.append(
                Run(variant, k, [w / 2, w / 2], w, 1 << 20, cpu_window=0.9 * scale, hook_seconds=hooks)
            )
    r.loader_batches_per_sec = 400.0
    return r


def test_table_reports_paired_ratios_and_overheads() -> None:
    r = _result()
    assert r.paired(LIGHTNING, BARE) == pytest.approx([1 / 1.02, 1 / 1.02])  # pairing cancels the 2×
    assert r.paired(LIGHTNING, BARE, "cpu") == pytest.approx([1.0, 1.0])
    table = format_table(r)
    for col in COLUMNS:
        assert col in table
    # on a CPU the verdict goes by CPU time; wall time is shown beside it
    assert "lightning / bare, tokens/s (cpu): 1.000 [per round 1.000–1.000] (target >= 0.97: meets" in table
    assert "lightning / bare, tokens/s (wall): 0.980 [per round 0.980–0.980]\n" in table
    assert "telemetry every 10 step(s) (wall): +2.0%" in table
    assert (
        "telemetry every 10 step(s) (cpu): +0.0% step time vs none [per round +0.0%–+0.0%] (target" in table
    )
    assert (
        "telemetry every 10 step(s), its hooks' own CPU time: 3.37 ms/step = 0.50% of the "
        "telemetry-off step (cpu) (target <= 1%: meets target)"
    ) in table
    assert "6·N + 12·L·T·d = 6·100 + 12·2·4·8 = 1,000" in table
    assert "the tied head matrix kept" in table
    assert "400.0 batches/s" in table
    json.dumps(r.to_dict())  # what bench.json writes


def test_gpu_verdicts_use_wall_time() -> None:
    r = _result()
    r.setup["device"] = "NVIDIA H200"
    table = format_table(r)
    assert "(cpu)" not in table and "CPU ms/step" not in table
    assert "lightning / bare, tokens/s (wall): 0.980 [per round 0.980–0.980] (target >= 0.97: meets" in table
    assert "telemetry every 10 step(s) (wall): +2.0%" in table and "MISSES target" in table


@pytest.mark.slow
def test_bench_cli_runs_two_steps_and_prints_the_table(tmp_path: Path, cache_dir: Path) -> None:
    out = tmp_path / "bench.json"
    proc = run_script(
        "scripts/bench.py",
        "model.n_layer=1",
        "model.n_embd=32",
        "model.n_head=2",
        "model.block_size=32",
        "data.batch_size=2",
        "data.max_bytes=100000",
        f"data.cache_dir={cache_dir}",
        "trainer.accelerator=cpu",
        "bench.steps=2",
        "bench.warmup=1",
        "bench.repeats=1",
        "bench.loader_batches=5",
        "bench.matmul_size=128",
        "bench.matmul_repeats=2",
        "bench.threads=1",
        f"bench.json={out}",
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    for col in COLUMNS:
        assert col in proc.stdout
    for variant in (BARE, LIGHTNING, "lightning+telemetry/10", "lightning+telemetry/1"):
        assert f"\n{variant} " in proc.stdout
    assert "lightning / bare, tokens/s (cpu):" in proc.stdout and "CPU ms/step" in proc.stdout
    assert "tokenize configured corpus" in proc.stdout and "DataLoader alone" in proc.stdout
    data = json.loads(out.read_text())
    assert all(len(run["step_times"]) == 2 for run in data["runs"])
    assert data["summary"][BARE]["tokens_per_sec"] > 0


@pytest.mark.parametrize(
    "override, field",
    [("trainer.devices=2", "trainer.devices=2"), ("trainer.accumulate_grad_batches=2", "accumulate")],
)
def test_bench_rejects_what_it_cannot_time(tmp_path: Path, override: str, field: str) -> None:
    cfg = compose([override, "trainer.accelerator=cpu"])
    with pytest.raises(ValueError, match=field) as err:
        run_bench(cfg, BenchOptions(), workdir=tmp_path)
    assert "accepted" in str(err.value)
