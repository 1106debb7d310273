# ruff: noqa: E501  (the documented commands, as long as the docs write them)
"""README's train runs on one checkpoint: `make train`, then the interop chain (generate, evaluate,
export, the HF forms, init_from); any field set directly (24 layers); the parameter report."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from gptlab.analysis.params import main as params_main
from tests.docs.commands.parse import REPO
from tests.docs.commands.run import (
    CSV,
    NO_TASKS,
    SMALL,
    STEPS,
    Ran,
    finished,
    finite,
    in_parallel,
    make,
    result,
    run_argv,
    run_doc,
    run_doc_here,
    the_only,
)
from tests.interop.helpers import load_cli


def demo_chain(home: Path, cache: Path) -> dict[str, object]:
    """`make train` (the default run, shrunk to 4 steps) into outputs/demo, then README's interop
    block on its checkpoint, in order."""
    out: dict[str, object] = {}
    demo = home / "outputs" / "demo"
    # the pools' 200 kB of the corpus (not all of the stdlib's sources) and 4 val windows, in the run
    # and in both evaluations (evaluate's data.* overrides: the run's own); no in-loop task (unread)
    data = [f"data.cache_dir={cache}", "data.max_bytes=200000", "data.val_windows=4"]
    args = ["trainer.max_steps=4", "trainer.val_check_interval=2", "sample.max_new_tokens=16",
            f"hydra.run.dir={demo}", *data, NO_TASKS, "trainer.enable_progress_bar=false"]  # fmt: skip
    out["train"] = run_argv(make("train", "ARGS=" + " ".join(args)), cwd=REPO)
    if out["train"].returncode != 0:
        return out
    gen = "python generate.py ckpt_path=outputs/demo/checkpoints/last.ckpt prompt='def ' max_new_tokens=200 temperature=0.8 top_k=50 seed=0"  # noqa: E501
    out["generate"] = run_doc(gen, cwd=home)
    out["evaluate"] = run_doc(
        "python evaluate.py ckpt_path=outputs/demo/checkpoints/last.ckpt", *data, cwd=home
    )
    exp = "python scripts/export.py ckpt_path=outputs/demo/checkpoints/last.ckpt out_dir=outputs/demo/hf"
    out["export"] = run_doc_here(exp, load_cli("scripts/export.py").main, cwd=home)  # reads the run: here
    hf = "python generate.py ckpt_path=outputs/demo/hf prompt='import ' top_p=0.9 top_k=0 seed=0"
    out["generate_hf"] = run_doc(hf, cwd=home)
    out["evaluate_hf"] = run_doc("python evaluate.py ckpt_path=outputs/demo/hf", *data, cwd=home)
    ft = (
        "python train.py model.init_from=outputs/demo/hf optim.lr=3e-4 optim.warmup_steps=0 trainer.max_steps=100 "
        "trainer.val_check_interval=50 hydra.run.dir=outputs/demo-ft"
    )
    out["init_from"] = run_doc(ft, *STEPS, "sample.max_new_tokens=0", *data, NO_TASKS, CSV, cwd=home)
    return out


@pytest.fixture(scope="module")
def trains(work: Path, cache: Path) -> dict[str, object]:
    c = f"data.cache_dir={cache}"
    jobs: dict[str, Callable[[], object]] = {
        "demo": lambda: demo_chain(work / "home", cache),
        "layers24": lambda: run_doc(
            "python train.py model.n_layer=24 optim.warmup_steps=0", *SMALL, "trainer.max_steps=1", c,
            "model.block_size=64", "data.batch_size=2", "model.n_embd=32", "model.n_head=2", CSV, NO_TASKS,
            cwd=work / "layers24",  # 24 blocks as documented, each 32 wide: the test reads the depth
        ),
        "params": lambda: [
            run_doc("python -m gptlab.analysis.params model=gpt2", cwd=work / "params"),
            run_doc_here("python -m gptlab.analysis.params", params_main, cwd=work / "params"),  # the CLI: above
        ],
    }  # fmt: skip
    return in_parallel(jobs)


def _loss(ran: Ran) -> float:
    m = re.search(r"\bloss\b\D*?(-?\d+\.\d+(?:e-?\d+)?)", ran.stdout)
    assert m, ran.stdout
    return float(m.group(1))


@pytest.mark.slow
def test_make_train_then_the_interop_chain(trains: dict[str, object], work: Path) -> None:
    chain = result(trains, "demo")
    chain["train"].ok()
    demo = work / "home" / "outputs" / "demo"
    run = finished(demo)
    assert run["steps"] == 4 and finite(run["final_val_loss"] if "final_val_loss" in run else run["val_loss"])
    assert (demo / "checkpoints" / "last.ckpt").is_file() and (demo / "csv" / "metrics.csv").is_file()
    assert chain["generate"].ok().stdout.startswith("def ") and len(chain["generate"].stdout) > 20
    loss = _loss(chain["evaluate"].ok())
    hf = demo / "hf"
    chain["export"].ok()
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= {p.name for p in hf.iterdir()}
    assert json.loads((hf / "config.json").read_text())["architectures"] == ["LlamaForCausalLM"]
    assert chain["generate_hf"].ok().stdout.startswith("import ")
    assert _loss(chain["evaluate_hf"].ok()) == pytest.approx(loss, abs=1e-4)  # "the same numbers"
    chain["init_from"].ok()
    assert finished(work / "home" / "outputs" / "demo-ft")["steps"] == 2


@pytest.mark.slow
def test_any_field_directly_24_layers(trains: dict[str, object], work: Path) -> None:
    result(trains, "layers24").ok()
    run_dir = the_only("outputs/*/*", work / "layers24")  # the default outputs/<date>/<time>/
    finished(run_dir)
    cfg = yaml.safe_load((run_dir / ".hydra" / "config.yaml").read_text())
    assert cfg["model"]["n_layer"] == 24 and cfg["optim"]["warmup_steps"] == 0


@pytest.mark.slow
def test_param_report(trains: dict[str, object]) -> None:
    gpt2, default = result(trains, "params")
    assert "124" in gpt2.ok().stdout, gpt2.stdout  # GPT-2 124M
    assert default.ok().stdout.strip()
