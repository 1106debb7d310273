# ruff: noqa: E501  (the documented commands, as long as the docs write them)
"""The other scripts the docs name, shrunk: the init reports, the bench rows (and `make bench`),
GPT-2's bench shape, the packing benchmark, the unigram reference heredoc."""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from gptlab.analysis.init.report import main as init_report_main
from gptlab.bench.cli import main as bench_main
from tests.docs.commands.parse import REPO
from tests.docs.commands.run import in_parallel, make, result, run_argv, run_doc, run_doc_here
from tests.in_process import usage_of

BENCH_TINY = ["bench.steps=2", "bench.warmup=1", "bench.repeats=1", "bench.loader_batches=5",
              "bench.matmul_size=128", "bench.matmul_repeats=2", "data.max_bytes=100000"]  # fmt: skip


def unigram_code() -> str:
    text = (REPO / "docs" / "ablations.md").read_text()
    m = re.search(r"python - <<'EOF'\n(.*?)\nEOF\n", text, re.S)
    assert m, "the unigram heredoc of docs/ablations.md"
    return m.group(1)


@pytest.fixture(scope="module")
def tools(work: Path, cache: Path) -> dict[str, object]:
    root = work / "tools"
    c = f"data.cache_dir={cache}"
    init = [c, "seeds=1", "batch=1", "data.max_bytes=100000", "model.n_layer=2", "model.n_embd=64"]  # shrunk
    bench = [c, "trainer.accelerator=cpu", *BENCH_TINY]
    # the rows these tests read: bare and lightning, no tokenizer timing (every variant and the
    # tokenize rows: tests/bench/test_bench.py::test_bench_cli_runs_two_steps_and_prints_the_table)
    rows = ["bench.variants=bare,lightning", "bench.tokenize=false"]
    lightning = ["bench.steps=1", "bench.warmup=1"]
    pack = ["--sizes-mib", "1", "--rounds", "1", "--work", str(root / "packing")]
    init_here = functools.partial(init_report_main, usage=usage_of("scripts/init_report.py"))
    one = ["--procs", "1"]  # a pool of 2 where a test reads its row: the tiktoken-only command
    jobs: dict[str, Callable[[], object]] = {
        # the init reports and bench tables build no training process: their `main` here, one after
        # another (one subprocess each keeps the command line tested: the first init report below,
        # `make bench`, and tests/bench/test_bench.py's CLI run)
        "init_reports": lambda: [
            run_doc("python scripts/init_report.py model=pre_rmsnorm_swiglu model.n_layer=12", *init, cwd=root / "init"),
            run_doc_here("python scripts/init_report.py model=pre_rmsnorm_swiglu model.n_layer=24 "
                         "out=outputs/init_report/pre_rmsnorm_swiglu_L24", init_here, *init, cwd=root / "init"),
            run_doc_here("python scripts/init_report.py model=post_layernorm_gelu model.n_layer=12 "
                         "\"model.init_std='1/sqrt(d)'\" model.depth_scaled_init=none "
                         "out=outputs/init_report/post_layernorm_gelu_xavier", init_here, *init, cwd=root / "init"),
        ],
        "bench": lambda: [
            run_doc_here("python scripts/bench.py model=post_layernorm_gelu bench.threads=1 bench.repeats=5",
                         bench_main, *bench, *rows, cwd=root),
            run_doc_here("python scripts/bench.py model/size=small data.batch_size=4 bench.variants=bare,lightning",
                         bench_main, *bench, *rows, cwd=root),
            run_argv(make("bench", "ARGS=" + " ".join([*bench, *rows, "model.n_layer=1", "model.n_embd=32",
                                                       "model.n_head=2", "model.block_size=32", "data.batch_size=2"])),
                     REPO),
        ],
        "bench_gpt2": lambda: run_doc_here(
            "python scripts/bench.py model=gpt2 model.block_size=256 data.batch_size=1 bench.threads=1 bench.warmup=2 "
            "bench.repeats=2 bench.tokenize=false", bench_main, *bench, *lightning, *rows, "bench.repeats=1",
            "model.n_layer=1", cwd=root,  # one of GPT-2's 12 blocks: the shape's embedding, head and block, 12x cheaper
        ),
        "packing": lambda: [
            run_doc("PYTHONPATH=src OMP_NUM_THREADS=1 python -m dev.bench.packing --sizes-mib 2048,512 "
                    "--tokenizers byte --procs 1,2 --rounds 2", *pack, *one, cwd=root),
            run_doc("PYTHONPATH=src OMP_NUM_THREADS=1 python -m dev.bench.packing --sizes-mib 128,32 "
                    "--tokenizers bpe --procs 1,2 --rounds 2", *pack, *one, cwd=root),
            run_doc("PYTHONPATH=src OMP_NUM_THREADS=1 python -m dev.bench.packing --sizes-mib 512,128,32 "
                    "--tokenizers bpe --encoders tiktoken --procs 1,2 --rounds 2", *pack, "--procs", "1,2", cwd=root),
        ],
        "unigram": lambda: run_doc("python - <<'EOF'", cwd=root / "unigram", stdin=unigram_code()),
    }  # fmt: skip
    return in_parallel(jobs)


@pytest.mark.slow
def test_init_reports(tools: dict[str, object], work: Path) -> None:
    for ran in result(tools, "init_reports"):
        ran.ok()
    outs = work / "tools" / "init" / "outputs" / "init_report"
    for name in ("pre_rmsnorm_swiglu", "pre_rmsnorm_swiglu_L24", "post_layernorm_gelu_xavier"):
        assert (outs / name / "report.md").is_file(), name


@pytest.mark.slow
def test_bench_rows(tools: dict[str, object]) -> None:
    for ran in result(tools, "bench"):
        assert "lightning / bare" in ran.ok().stdout or "lightning" in ran.stdout, ran.stdout[-2000:]


@pytest.mark.slow
def test_make_bench(tools: dict[str, object]) -> None:
    assert "command: python scripts/bench.py" in result(tools, "bench")[-1].ok().stdout


@pytest.mark.slow
def test_bench_gpt2_shape(tools: dict[str, object]) -> None:
    assert "command: python scripts/bench.py model=gpt2" in result(tools, "bench_gpt2").ok().stdout


@pytest.mark.slow
def test_bench_packing(tools: dict[str, object]) -> None:
    for ran in result(tools, "packing"):
        assert "MB/s" in ran.ok().stdout or "MiB" in ran.stdout, ran.stdout[-2000:]
    bpe = result(tools, "packing")[1].stdout  # issue 23: the BPE rows, one per encoder, side by side
    assert "| bpe (tiktoken) |" in bpe and "| bpe (tokenizers) |" in bpe, bpe[-2000:]
    pool = result(tools, "packing")[2].stdout  # where processes pay: tiktoken only, 1 and 2 processes
    assert "| bpe (tiktoken) | 2 |" in pool and "| bpe (tokenizers) |" not in pool, pool[-2000:]


@pytest.mark.slow
def test_unigram_reference_heredoc(tools: dict[str, object]) -> None:
    out = result(tools, "unigram").ok().stdout
    m = re.search(r"val cross-entropy under the train unigram distribution: (\d+\.\d+)", out)
    assert m and 2.5 < float(m.group(1)) < math.log(256), out
