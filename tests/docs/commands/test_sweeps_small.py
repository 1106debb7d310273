# ruff: noqa: E501  (the documented commands, as long as the docs write them)
"""The other sweeps the docs name, shrunk: ablate_tying and ablate_init, the quick presets (and
ablate_init_quick, the one that crashed), the LR search, the depth-check sizing run."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from tests.docs.commands.run import (
    CSV,
    GRID,
    NO_TASKS,
    STEPS,
    SWEEP_SMALL,
    finite,
    in_order,
    result,
    run_train_doc_here,
    sweep_args,
    sweep_finished,
    the_only,
    train_argv_here,
)
from tests.docs.commands.table import COMMANDS


@pytest.fixture(scope="module")
def sweeps(work: Path, cache: Path) -> dict[str, object]:
    root = work / "sweeps"
    sw = sweep_args(cache)
    c = f"data.cache_dir={cache}"  # lr_search: no optim.lr, which would replace the searched one
    sizing = next(
        c for c in COMMANDS if c.startswith("OMP_NUM_THREADS=1 python train.py -m experiment=ablate_init")
    )
    # the quick presets at 2 of their 12 steps, on the other sweeps' 200 kB stream (one token cache)
    quick = [
        *STEPS,
        "data.max_bytes=200000",
        NO_TASKS,
        "hydra.sweeper.seeds=1",
        CSV,
        f"data.cache_dir={cache}",
    ]
    # every one a serial sweep (one slot): its jobs in train.py's own process, here this one, one
    # sweep after another (tests/docs/commands/run.py `run_train_doc_here`)
    jobs: dict[str, Callable[[], object]] = {
        "tying": lambda: run_train_doc_here("python train.py -m experiment=ablate_tying logger=csv", *sw, cwd=root / "tying"),
        "init": lambda: run_train_doc_here("python train.py -m experiment=ablate_init logger=csv", *sw, cwd=root / "init"),
        "ffn_quick": lambda: run_train_doc_here(
            "python train.py -m experiment=ablate_ffn_quick", *quick,
            cwd=root / "ffn_quick",  # one of its 2 seeds (the seed grid: tests/ablation/test_experiments.py)
        ),
        # not a command of the docs (they say "each preset has a _quick sibling"); the one that crashed
        "init_quick": lambda: train_argv_here(["-m", "experiment=ablate_init_quick", *quick], root / "init_quick"),
        "lr_search": lambda: run_train_doc_here(
            "python train.py -m experiment=lr_search logger=csv", *SWEEP_SMALL, *GRID, c, "hydra.sweeper.n_trials=2",
            cwd=root / "lr",
        ),
        "sizing": lambda: run_train_doc_here(
            sizing, *SWEEP_SMALL, f"data.cache_dir={cache}", cwd=root / "sizing",
        ),
    }  # fmt: skip
    return in_order(jobs)


@pytest.mark.slow
def test_ablate_tying_and_init(sweeps: dict[str, object], work: Path) -> None:
    result(sweeps, "tying").ok()
    sweep_finished(the_only("multirun/*", work / "sweeps" / "tying"), 2)
    result(sweeps, "init").ok()
    sweep_finished(the_only("multirun/*", work / "sweeps" / "init"), 6)  # 3 inits x n_layer 2, 8


@pytest.mark.slow
def test_quick_presets_as_documented(sweeps: dict[str, object], work: Path) -> None:
    result(sweeps, "ffn_quick").ok()
    sweep = the_only("multirun/*", work / "sweeps" / "ffn_quick")
    sweep_finished(sweep, 4)  # 2 arms x 2 LRs x 1 seed
    assert (sweep / "report.md").is_file()
    result(sweeps, "init_quick").ok()  # crashed with "Can only enumerate CHOICE and RANGE sweeps"
    sweep_finished(the_only("multirun/*", work / "sweeps" / "init_quick"), 4)


@pytest.mark.slow
def test_lr_search(sweeps: dict[str, object], work: Path) -> None:
    result(sweeps, "lr_search").ok()
    sweep = the_only("multirun/*", work / "sweeps" / "lr")
    best = yaml.safe_load((sweep / "optimization_results.yaml").read_text())
    assert finite(best["best_value"]) and "optim.lr" in best["best_params"], best


@pytest.mark.slow
def test_depth_check_sizing_run(sweeps: dict[str, object], work: Path) -> None:
    result(sweeps, "sizing").ok()
    runs = sweep_finished(work / "sweeps" / "sizing" / "multirun" / "size" / "d32b16_L2", 3)
    assert len({tuple(r["overrides"]) for r in runs}) == 3
