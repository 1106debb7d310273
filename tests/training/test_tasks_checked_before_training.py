"""A task file the run's tokenizer cannot score stops the run before step 1 (issue 48, item 3).

`"for i in range(10)" + ":"`: a BPE trained on Python source merges `):` into one token, so the choice
adds no token after its context and lm-eval's split cannot score it. callbacks/tasks.py encodes every
task's requests with the run's tokenizer at `setup`: the run stops there in one line, exit 2, with
no training step taken (a probe counts the training batches) and no checkpoint written. The oracle
that the tokenizer does merge is the run's own packed tokenizer, read back after the run.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import lightning as L
import pytest

from gptlab.errors import USER_ERRORS, one_line
from tests.training.rel_harness import REPO, TINY, train_here, with_callbacks

ROW = {"context": "for i in range(10)", "choices": [":", " pass"], "answer": 0}
BPE = ["data.tokenizer=bpe", "data.bpe_vocab_size=512"]
QUICK = ["trainer.max_steps=2", "trainer.val_check_interval=1", "callbacks.tasks.every_n_steps=null"]
WANT = (
    r"error: callbacks\.tasks\.names: task='{f}' line 1 choice 0: the continuation ':' adds no tokens "
    r"after its context \(the tokenizer merges it into the context's last token\); accepted: a choice "
    r"that starts a new token, e\.g\. after a space"
)


def _run(*args: str) -> subprocess.CompletedProcess:
    """A CLI run of this tree's gptlab (its src first on the path, whatever the venv installed)."""
    env = {"WANDB_MODE": "disabled", "PATH": "/usr/bin:/bin", "HOME": str(Path.home())}
    env["PYTHONPATH"] = str(REPO / "src")
    return subprocess.run(
        [sys.executable, *args], cwd=REPO, capture_output=True, text=True, timeout=300, env=env
    )


class Batches(L.Callback):
    """Counts the training batches the run starts."""

    def __init__(self) -> None:
        self.n = 0

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: Any, batch: Any, i: int) -> None:
        self.n += 1


@pytest.fixture(scope="module")
def merge(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("merge") / "merge.jsonl"
    path.write_text(json.dumps(ROW) + "\n")
    return path


@pytest.fixture(scope="module")
def bpe_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache of this module's own: its one tokenizer.json is the runs' BPE."""
    return tmp_path_factory.mktemp("merge_cache")


def test_a_merging_choice_stops_the_run_before_step_1(
    merge: Path, bpe_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    probe = Batches()
    with_callbacks(monkeypatch, probe)
    with pytest.raises(USER_ERRORS) as err:
        train_here(tmp_path / "run", bpe_cache, *QUICK, *BPE, f"callbacks.tasks.names=[{merge}]")
    assert re.fullmatch(WANT.format(f=re.escape(str(merge))), one_line(err.value)), one_line(err.value)
    assert probe.n == 0  # not one training step
    assert not (tmp_path / "run" / "checkpoints").exists()
    # the oracle: the run's own tokenizer does merge ")" and ":" (else the test proves nothing)
    from gptlab.data.tokenizers import BPETokenizer

    (file,) = bpe_cache.glob("*/tokenizer.json")  # the packed entry's, which the run encodes with
    tok = BPETokenizer.from_file(file)
    whole, head = tok.encode(ROW["context"] + ":"), tok.encode(ROW["context"])
    assert len(whole) == len(head) and whole != head


@pytest.mark.slow
def test_cli_refuses_the_task_file_in_one_line_before_training(
    merge: Path, bpe_cache: Path, tmp_path: Path
) -> None:
    """Real train.py: exit 2, one `error:` line (the last), metrics.json failed, nothing trained."""
    run = tmp_path / "run"
    proc = _run(
        "train.py", *TINY, *QUICK, *BPE, f"data.cache_dir={bpe_cache}", f"hydra.run.dir={run}",
        f"callbacks.tasks.names=[{merge}]",
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert errors == [proc.stderr.strip().splitlines()[-1]]
    assert re.fullmatch(WANT.format(f=re.escape(str(merge))), errors[0]), errors[0]
    status = json.loads((run / "metrics.json").read_text())
    assert status["status"] == "failed" and status["error"] == errors[0]
    assert not (run / "checkpoints").exists()
    logged = "".join(f.read_text() for f in run.rglob("metrics.csv"))
    assert "train/loss" not in logged  # no training step logged
