"""Decay branches against their single-run twins, bit for bit on CPU (dropout on, so the RNG matters):
the branch from step s with decay d is one WSD run of s + d steps decaying over its last d (same
seed): the loss at every step, the data at every step, the final weights. A branch of a trunk that
was interrupted and resumed is the branch of the uninterrupted trunk. And the refusals, one line each,
with nothing written in the branch's directory or the trunk's."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import lightning as L
import pytest
import torch
import yaml

from gptlab.errors import USER_ERRORS, one_line
from tests.training.rel_harness import REPO, TINY, series, train_here, with_callbacks

RUN = [
    "optim.schedule=wsd",
    "optim.warmup_steps=2",
    "optim.min_lr=0",
    "trainer.deterministic=true",
    "model.dropout=0.2",
    "trainer.val_check_interval=4",  # a validation at the branch point 4: it must not shift the stream
    "callbacks.checkpoint_every_n_steps=3",  # last.ckpt at 3 and 6: the interrupted trunk resumes at 6
]
TRUNK = [*RUN, "optim.decay_steps=0", "trainer.max_steps=8", "optim.branch_points=[4,8]"]


class Batches(L.Callback):
    """The data order: a digest of each step's batch."""

    def __init__(self) -> None:
        self.seen: dict[int, str] = {}

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule, batch, i) -> None:
        self.seen[trainer.global_step] = hashlib.sha256(batch.numpy().tobytes()).hexdigest()


class Crash(L.Callback):
    """Fails the run as step `at` starts (after the last.ckpt of checkpoint_every_n_steps=3)."""

    def __init__(self, at: int) -> None:
        self.at = at

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule, batch, i) -> None:
        if trainer.global_step == self.at:
            raise RuntimeError("simulated crash")


def run(run_dir: Path, cache: Path, *overrides: str, extra: L.Callback | None = None) -> dict[int, str]:
    batches = Batches()
    with pytest.MonkeyPatch.context() as mp:
        with_callbacks(mp, batches, *([extra] if extra else []))
        train_here(run_dir, cache, *overrides)
    torch.use_deterministic_algorithms(False)
    return batches.seen


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, cache: Path) -> dict:
    """A trunk, the twin of its branch (4, 3), that branch, and that branch crashed at 6 and resumed;
    a trunk crashed at 7 and resumed from its step-6 last.ckpt; the branch (8, 2) of each trunk."""
    base = tmp_path_factory.mktemp("wsd")
    out: dict = {"base": base}
    run(base / "trunk", cache, *TRUNK)
    out["twin"] = run(base / "twin", cache, *RUN, "optim.decay_steps=3", "trainer.max_steps=7")
    out["branch"] = run(
        base / "branch", cache, *RUN, f"branch_from={base / 'trunk'}", "branch.at=4", "optim.decay_steps=3"
    )
    with pytest.raises(RuntimeError, match="simulated crash"):
        run(base / "crashed", cache, *TRUNK, extra=Crash(7))
    run(base / "crashed", cache, *TRUNK, f"ckpt_path={base / 'crashed' / 'checkpoints' / 'last.ckpt'}")
    # validating every 2 steps: ModelCheckpoint saves last.ckpt after the validation at 6 (before a
    # first val/loss it defers), and the forked RNG makes the extra validations leave the losses alone
    branch = [*RUN, f"branch_from={base / 'trunk'}", "branch.at=4", "optim.decay_steps=3"]
    branch.append("trainer.val_check_interval=2")
    with pytest.raises(RuntimeError, match="simulated crash"):
        run(base / "branch-crashed", cache, *branch, extra=Crash(6))
    out["branch-resumed"] = run(
        base / "branch-crashed",
        cache,
        *branch,
        f"ckpt_path={base / 'branch-crashed' / 'checkpoints' / 'last.ckpt'}",
    )
    for trunk in ("trunk", "crashed"):
        run(
            base / f"{trunk}-8",
            cache,
            *RUN,
            f"branch_from={base / trunk}",
            "branch.at=8",
            "optim.decay_steps=2",
        )
    return out


def weights(run_dir: Path) -> dict[str, torch.Tensor]:
    return torch.load(run_dir / "checkpoints" / "last.ckpt", weights_only=True)["state_dict"]


def test_a_branch_is_its_single_run_twin_bit_for_bit(runs: dict) -> None:
    base = runs["base"]
    twin, branch = series(base / "twin", "train/loss"), series(base / "branch", "train/loss")
    assert sorted(branch) == [4, 5, 6]
    assert branch == {s: twin[s] for s in branch}  # exact float equality
    assert series(base / "branch", "lr") == {s: series(base / "twin", "lr")[s] for s in branch}
    assert runs["branch"] == {s: runs["twin"][s] for s in (4, 5, 6)}  # the same data at each step
    w_twin, w_branch = weights(base / "twin"), weights(base / "branch")
    assert w_twin.keys() == w_branch.keys()
    assert all(torch.equal(w_twin[k], w_branch[k]) for k in w_twin)


def test_a_branch_of_a_resumed_trunk_is_the_branch_of_the_uninterrupted_one(runs: dict) -> None:
    base = runs["base"]
    assert json.loads((base / "crashed" / "metrics.json").read_text())["status"] == "finished"
    a, b = base / "trunk-8", base / "crashed-8"
    assert series(a, "train/loss") == series(b, "train/loss") and sorted(series(a, "train/loss")) == [8, 9]
    assert all(torch.equal(weights(a)[k], v) for k, v in weights(b).items())
    ckpt = {
        t: torch.load(base / t / "checkpoints" / "branch_8.ckpt", weights_only=True)
        for t in ("trunk", "crashed")
    }
    assert ckpt["trunk"]["lr_schedulers"] == ckpt["crashed"]["lr_schedulers"]
    assert ckpt["trunk"]["callbacks"]["RNGStateCheckpoint"]["ranks"][0]["torch"].equal(
        ckpt["crashed"]["callbacks"]["RNGStateCheckpoint"]["ranks"][0]["torch"]
    )


def test_an_interrupted_branch_resumes_its_own_checkpoint(runs: dict) -> None:
    """branch_from with ckpt_path=<the branch's last.ckpt>: the rest of the branch, as uninterrupted."""
    base = runs["base"]
    again, branch = series(base / "branch-crashed", "train/loss"), series(base / "branch", "train/loss")
    assert again == branch  # its CSV keeps the first attempt's steps 4, 5; step 6 is the resumed run's
    assert runs["branch-resumed"] == {6: runs["branch"][6]}  # it ran step 6 alone, on step 6's data
    assert all(
        torch.equal(weights(base / "branch")[k], v) for k, v in weights(base / "branch-crashed").items()
    )


def test_the_branch_records_its_trunk_and_point(runs: dict) -> None:
    base = runs["base"]
    metrics = json.loads((base / "branch" / "metrics.json").read_text())
    trunk = json.loads((base / "trunk" / "metrics.json").read_text())
    assert metrics["branch"] == {
        "trunk": str((base / "trunk").resolve()), "trunk_name": trunk["run_name"], "at": 4,
        "decay_steps": 3, "group": trunk["group"],
    }  # fmt: skip
    assert metrics["group"] == trunk["group"] == trunk["run_name"] and metrics["steps"] == 7
    assert trunk["branch_points"] == [{"step": 4, "tokens": 4 * 4 * 32}, {"step": 8, "tokens": 8 * 4 * 32}]
    record = json.loads((base / "branch" / "wsd.json").read_text())["config"]
    assert record["optim"]["schedule"] == "wsd" and record["trainer"]["max_steps"] == 7
    hparams = yaml.safe_load((base / "branch" / "csv" / "hparams.yaml").read_text())
    assert hparams["branch"]["at"] == 4 and hparams["branch"]["trunk"] == metrics["branch"]["trunk"]
    assert (base / "trunk" / "checkpoints" / "best.ckpt").is_file()  # a branch leaves its trunk's files
    assert sorted(p.name for p in (base / "trunk" / "checkpoints").glob("branch_*")) == [
        "branch_4.ckpt",
        "branch_8.ckpt",
    ]


def refusal(runs: dict, cache: Path, name: str, *overrides: str) -> str:
    """The one line a branch is refused with; nothing is written in its directory or the trunk's."""
    base = runs["base"]
    before = {p: p.stat().st_mtime_ns for p in (base / "trunk").rglob("*")}
    try:
        train_here(base / name, cache, *RUN, *overrides)
    except USER_ERRORS as err:
        assert not (base / name).exists()
        assert {p: p.stat().st_mtime_ns for p in (base / "trunk").rglob("*")} == before
        return one_line(err)
    raise AssertionError(f"{overrides} was not refused")


def test_refusals_in_one_line(runs: dict, cache: Path) -> None:
    trunk, twin = runs["base"] / "trunk", runs["base"] / "twin"
    assert refusal(runs, cache, "no-ckpt", f"branch_from={trunk}", "branch.at=5", "optim.decay_steps=2") == (
        f"error: branch.at=5 has no checkpoint in '{trunk}' (no checkpoints/branch_5.ckpt); the trunk's "
        "branch points: [4, 8] (a running trunk saves each when it gets there)"
    )
    assert refusal(runs, cache, "decayed", f"branch_from={twin}", "branch.at=4", "optim.decay_steps=2") == (
        f"error: branch_from='{twin}' decayed (optim.schedule=wsd, decay_steps=3, decay_fraction=None): a "
        "branch starts from a trunk's held LR; train the trunk with optim.schedule=wsd optim.decay_steps=0"
    )
    assert refusal(
        runs, cache, "model", f"branch_from={trunk}", "branch.at=4", "optim.decay_steps=2", "model.n_layer=1"
    ) == (
        f"error: model.n_layer=1 but the trunk '{trunk}' has model.n_layer=2: a branch continues its "
        "trunk's run; give the trunk's settings (its wsd.json 'config')"
    )
    assert refusal(
        runs, cache, "data", f"branch_from={trunk}", "branch.at=4", "optim.decay_steps=2", "data.batch_size=2"
    ) == (
        f"error: data.batch_size=2 but the trunk '{trunk}' has data.batch_size=4: a branch continues its "
        "trunk's run; give the trunk's settings (its wsd.json 'config')"
    )
    assert refusal(runs, cache, "no-decay", f"branch_from={trunk}", "branch.at=4") == (
        "error: a branch takes optim.decay_steps=<d>, an integer >= 1 (got decay_steps=None, "
        "decay_fraction=None): it runs branch.at + d steps"
    )


def test_the_cli_refuses_a_branch_with_exit_2_and_one_line(tmp_path: Path, cache: Path) -> None:
    """train.py itself: exit 2, one stderr line, no checkpoint or log in the branch's directory."""
    out = tmp_path / "branch"
    args = [
        *TINY,
        f"data.cache_dir={cache}",
        *RUN,
        f"branch_from={tmp_path / 'none'}",
        "branch.at=4",
        "optim.decay_steps=2",
    ]
    proc = subprocess.run(
        [sys.executable, str(REPO / "train.py"), *args, f"hydra.run.dir={out}"],
        capture_output=True, text=True, timeout=300, cwd=REPO,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.strip() == (
        f"error: branch_from='{tmp_path / 'none'}' is not a trunk's run dir (no readable wsd.json); a trunk "
        "is a run of optim.schedule=wsd optim.decay_steps=0 optim.branch_points=[...]"
    )
    assert (
        not (out / "checkpoints").exists() and not (out / "csv").exists() and not (out / "wsd.json").exists()
    )
