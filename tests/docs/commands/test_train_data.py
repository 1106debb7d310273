# ruff: noqa: E501  (the documented commands, as long as the docs write them)
"""README's multiruns (three groups, presets x depths) and its data formats: own text files,
TinyStories as text, parquet and streamed, llm.c token shards with their tokenizer."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from tests.docs.commands.inputs import fineweb_shards, text_corpus, tinystories_parquet, tinystories_txt
from tests.docs.commands.run import (
    CSV,
    NO_TASKS,
    SMALL,
    STEPS,
    SWEEP_SMALL,
    finished,
    finite,
    in_order,
    jobs_of,
    result,
    run_train_doc_here,
    the_only,
)


@pytest.fixture(scope="module")
def data_runs(work: Path, cache: Path) -> dict[str, object]:
    # no in-loop task anywhere here (no test reads one): it is most of a tiny run's own time
    c = f"data.cache_dir={cache}"
    many = [*SWEEP_SMALL, c, CSV, "trainer.max_steps=1", "trainer.val_check_interval=1"]
    jobs: dict[str, Callable[[], object]] = {
        "multi8": lambda: run_train_doc_here(
            "python train.py -m model/placement=pre,post model/ffn=swiglu,gelu model/tying=tied,untied",
            *many, "model.n_layer=1", "model.block_size=32", "data.batch_size=2", cwd=work / "multi8",
        ),
        "multi4": lambda: run_train_doc_here(
            "python train.py -m model=pre_rmsnorm_swiglu,post_layernorm_gelu model.n_layer=2,4",
            *many, "model.block_size=32", "data.batch_size=2", cwd=work / "multi4",
        ),
        "text": lambda: run_train_doc_here(
            "python train.py data=text data.path='corpus/*.txt'", *SMALL, c, CSV, NO_TASKS, cwd=text_corpus(work / "text")
        ),
        "tinystories_txt": lambda: run_train_doc_here(
            "python train.py data=tinystories_txt data.path=TinyStories-train.txt", *SMALL, c, CSV, NO_TASKS,
            "data.bpe_vocab_size=512", "model.block_size=64", cwd=tinystories_txt(work / "tstxt"),
        ),
        "parquet": lambda: run_train_doc_here(
            "python train.py data=tinystories data.source=parquet data.path='TinyStories/data/train-*.parquet' "
            "data.max_bytes=null", *SMALL[:3], "data.val_windows=4", "sample.max_new_tokens=4", c, CSV, NO_TASKS,
            "data.bpe_vocab_size=512", "model.block_size=64", cwd=tinystories_parquet(work / "parquet"),
        ),
        "streaming": lambda: run_train_doc_here(
            "python train.py data=tinystories data.streaming=true data.max_bytes=2000000000", *STEPS,
            "data.val_windows=4", "sample.max_new_tokens=4", c, CSV, NO_TASKS,
            "data.path=TinyStories/data/train-*.parquet", "data.bpe_vocab_size=512", "model.block_size=64",
            cwd=tinystories_parquet(work / "streaming"),
        ),
        "tokens": lambda: run_train_doc_here(
            "python train.py data=tokens data.path='fineweb10B/fineweb_train_*.bin' "
            "data.val_path='fineweb10B/fineweb_val_*.bin' data.tokenizer_path=gpt2/tokenizer.json "
            "model.vocab_size=50304", *STEPS, "data.val_windows=4", "sample.max_new_tokens=4", c, CSV, NO_TASKS,
            "model.block_size=64", cwd=fineweb_shards(work / "tokens"),
        ),
    }  # fmt: skip
    # one at a time, in this process (run_train_doc_here: single runs, and multiruns on one slot)
    return in_order(jobs)


@pytest.mark.slow
def test_multirun_of_three_groups_is_8_jobs(data_runs: dict[str, object], work: Path) -> None:
    result(data_runs, "multi8").ok()
    sweep = the_only("multirun/*/*", work / "multi8")
    jobs = jobs_of(sweep)
    assert len(jobs) == 8
    seen = set()
    for job in jobs:
        cfg = yaml.safe_load((job / ".hydra" / "config.yaml").read_text())["model"]
        seen.add((cfg["norm_placement"], cfg["ffn"], cfg["tie_embeddings"]))
        finished(job)
    assert len(seen) == 8, seen


@pytest.mark.slow
def test_multirun_of_presets_and_depths_is_4_jobs(data_runs: dict[str, object], work: Path) -> None:
    result(data_runs, "multi4").ok()
    jobs = jobs_of(the_only("multirun/*/*", work / "multi4"))
    got = set()
    for job in jobs:
        cfg = yaml.safe_load((job / ".hydra" / "config.yaml").read_text())["model"]
        got.add((cfg["norm_placement"], cfg["n_layer"]))
        finished(job)
    assert got == {("pre", 2), ("pre", 4), ("post", 2), ("post", 4)}


def _trained_on(data_runs: dict[str, object], name: str, root: Path) -> dict:
    result(data_runs, name).ok()
    run = finished(the_only("outputs/*/*", root))
    assert finite(run.get("final_val_loss", run.get("val_loss"))), run
    return run


@pytest.mark.slow
def test_data_text_on_own_files(data_runs: dict[str, object], work: Path) -> None:
    _trained_on(data_runs, "text", work / "text")


@pytest.mark.slow
def test_data_tinystories_txt(data_runs: dict[str, object], work: Path) -> None:
    _trained_on(data_runs, "tinystories_txt", work / "tstxt")


@pytest.mark.slow
def test_data_tinystories_parquet(data_runs: dict[str, object], work: Path) -> None:
    _trained_on(data_runs, "parquet", work / "parquet")


@pytest.mark.slow
def test_data_tinystories_streaming_local(data_runs: dict[str, object], work: Path) -> None:
    _trained_on(data_runs, "streaming", work / "streaming")


@pytest.mark.slow
def test_data_tokens_llmc_shards(data_runs: dict[str, object], work: Path) -> None:
    run = _trained_on(data_runs, "tokens", work / "tokens")
    assert run["sample"], run  # decoded by gpt2/tokenizer.json
