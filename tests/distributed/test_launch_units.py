"""Launch plumbing without a cluster: the output-dir resolver, the SLURM environment and its
requeue (a fake `scontrol` on PATH), the atomic directory swap, and consolidate.py's input checks."""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import signal
import socket
from pathlib import Path
from typing import Any

import lightning as L
import pytest
import torch
from lightning.fabric.plugins.environments import SLURMEnvironment
from omegaconf import OmegaConf
from torch.utils.data import DataLoader

from gptlab.config import OptimConfig, TrainerConfig
from gptlab.launch_id import launch_id, register_resolver
from gptlab.model import GPTConfig
from gptlab.training.module import GPTLightningModule
from gptlab.training.strategies import REQUEUE_SIGNAL, build_strategy, cluster_environment, swap_in

REPO = Path(__file__).resolve().parents[2]
LAUNCH_VARS = (
    "TORCHELASTIC_RUN_ID",
    "SLURM_JOB_ID",
    "SLURM_ARRAY_JOB_ID",
    "SLURM_ARRAY_TASK_ID",
    "SLURM_STEP_ID",
    "SLURM_STEPID",
    "SLURM_NTASKS",
    "SLURM_JOB_NAME",
)


@pytest.fixture
def no_launcher(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for key in LAUNCH_VARS:
        monkeypatch.delenv(key, raising=False)
    return monkeypatch


def fake_slurm(mp: pytest.MonkeyPatch, job_id: str = "4242") -> None:
    """What srun sets for a one-task step (enough for Lightning's SLURMEnvironment)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.setenv("SLURM_NTASKS", "1")
    mp.setenv("SLURM_JOB_NAME", "gptlab-test")
    mp.setenv("SLURM_JOB_ID", job_id)
    mp.setenv("SLURM_STEP_ID", "0")
    mp.setenv("SLURM_PROCID", "0")
    mp.setenv("SLURM_LOCALID", "0")
    mp.setenv("SLURM_NODEID", "0")
    mp.setenv("SLURM_NODELIST", "127.0.0.1")
    mp.setenv("MASTER_ADDR", "127.0.0.1")
    mp.setenv("MASTER_PORT", str(port))


# ---- ${launch_id:...} ------------------------------------------------------------------------
def test_launch_id_prefers_torchrun_then_slurm(no_launcher: pytest.MonkeyPatch) -> None:
    assert launch_id("2026-01-01/10-00-00") == "2026-01-01/10-00-00"
    no_launcher.setenv("SLURM_JOB_ID", "77")
    assert launch_id("t") == "t", "a plain salloc shell (no job step) keeps the timestamp"
    no_launcher.setenv("SLURM_STEP_ID", "3")
    assert launch_id("t") == "slurm-77.3"
    no_launcher.setenv("SLURM_ARRAY_JOB_ID", "70")
    no_launcher.setenv("SLURM_ARRAY_TASK_ID", "5")
    assert launch_id("t") == "slurm-70_5.3"
    no_launcher.setenv("TORCHELASTIC_RUN_ID", "none")  # torchrun's default --rdzv-id
    assert launch_id("t") == "slurm-70_5.3"
    no_launcher.setenv("TORCHELASTIC_RUN_ID", "abc/../x")
    assert launch_id("t") == "torchrun-abc_.._x"  # never a path separator


def test_hydra_dirs_use_the_launch_id(no_launcher: pytest.MonkeyPatch) -> None:
    from hydra.core.utils import setup_globals

    setup_globals()  # Hydra's ${now:...}
    register_resolver()
    cfg = OmegaConf.load(REPO / "conf" / "hydra" / "default.yaml")
    assert str(cfg.run.dir).startswith("outputs/20")
    no_launcher.setenv("TORCHELASTIC_RUN_ID", "r1")
    assert cfg.run.dir == "outputs/torchrun-r1" and cfg.sweep.dir == "multirun/torchrun-r1"


# ---- SLURM: Lightning's environment with auto-requeue, wired into the strategies --------------
def test_cluster_environment_only_under_srun(no_launcher: pytest.MonkeyPatch) -> None:
    assert cluster_environment() is None
    fake_slurm(no_launcher)
    env = cluster_environment()
    assert isinstance(env, SLURMEnvironment) and env.auto_requeue
    assert env.requeue_signal == signal.SIGUSR1 == REQUEUE_SIGNAL
    for strategy in ("ddp", "fsdp"):
        built = build_strategy(TrainerConfig(strategy=strategy), devices=1)
        assert isinstance(built.cluster_environment, SLURMEnvironment), strategy
    no_launcher.setenv("TORCHELASTIC_RUN_ID", "x")  # torchrun inside an allocation: Lightning's pick
    assert cluster_environment() is None


class SignalAt(L.Callback):
    """Sends the requeue signal to this process after a given optimizer step (test only)."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_train_batch_end(self, trainer: L.Trainer, *args: Any) -> None:
        if trainer.global_step == self.step:
            os.kill(os.getpid(), REQUEUE_SIGNAL)


class FirstStep(L.Callback):
    def on_train_start(self, trainer: L.Trainer, pl_module: Any) -> None:
        self.first = trainer.global_step


def _tiny_trainer(root: Path, callbacks: list[L.Callback]) -> L.Trainer:
    return L.Trainer(
        accelerator="cpu",
        devices=1,
        max_steps=4,
        strategy=build_strategy(TrainerConfig(strategy="ddp"), 1),
        default_root_dir=str(root),
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=callbacks,
        limit_val_batches=0,
        num_sanity_val_steps=0,
    )


@pytest.mark.slow
def test_sigusr1_saves_requeues_and_the_requeued_run_resumes(
    no_launcher: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake_slurm(no_launcher)
    bin_dir, calls = tmp_path / "bin", tmp_path / "scontrol_calls"
    bin_dir.mkdir()
    (bin_dir / "scontrol").write_text(f'#!/bin/sh\necho "$@" >> {calls}\n')
    (bin_dir / "scontrol").chmod(0o755)
    no_launcher.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    cfg = GPTConfig(vocab_size=32, block_size=8, n_layer=1, n_head=2, n_embd=16)
    data = DataLoader(
        list(torch.randint(0, 32, (16, 9), generator=torch.Generator().manual_seed(0))), batch_size=2
    )

    def module() -> GPTLightningModule:
        return GPTLightningModule(model=dataclasses.asdict(cfg), optim=dataclasses.asdict(OptimConfig()))

    try:
        first = _tiny_trainer(tmp_path, [SignalAt(2)])
        assert first._accelerator_connector.cluster_environment.auto_requeue
        first.fit(module(), train_dataloaders=data)
        assert (tmp_path / "hpc_ckpt_1.ckpt").is_file()
        assert calls.read_text().split() == ["requeue", "4242"]

        # the requeued job: same directory, no ckpt_path; Lightning picks the hpc checkpoint
        first_step = FirstStep()
        second = _tiny_trainer(tmp_path, [first_step])
        second.fit(module(), train_dataloaders=data)
        assert first_step.first == 2 and second.global_step == 4
    finally:
        if torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()


# ---- the distributed checkpoint's atomic swap, and consolidate.py's refusals -----------------
def test_swap_in_replaces_a_directory_or_a_file(tmp_path: Path) -> None:
    target = tmp_path / "last.ckpt"
    for old in ("dir", "file"):
        if old == "dir":
            target.mkdir()
            (target / "stale").write_text("old")
        else:
            target.write_text("old single-file checkpoint")
        new = tmp_path / ".last.ckpt.tmp"
        new.mkdir()
        (new / "shard").write_text(old)
        swap_in(new, target)
        assert sorted(p.name for p in target.iterdir()) == ["shard"]
        assert sorted(p.name for p in tmp_path.iterdir()) == ["last.ckpt"]
        for p in target.iterdir():
            p.unlink()
        target.rmdir()


def _consolidate_module() -> Any:
    spec = importlib.util.spec_from_file_location("consolidate", REPO / "scripts" / "consolidate.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_consolidate_refuses_what_is_not_a_distributed_checkpoint(tmp_path: Path) -> None:
    mod = _consolidate_module()
    with pytest.raises(FileNotFoundError, match="does not exist"):
        mod.consolidate(tmp_path / "missing", tmp_path / "o.pt")
    (tmp_path / "file.ckpt").write_bytes(b"x")
    with pytest.raises(ValueError, match="not a distributed checkpoint directory"):
        mod.consolidate(tmp_path / "file.ckpt", tmp_path / "o.pt")
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / "meta.pt").write_bytes(b"x")
    with pytest.raises(FileNotFoundError, match=r"lacks \.metadata"):
        mod.consolidate(tmp_path / "half", tmp_path / "o.pt")
    assert not (tmp_path / "o.pt").exists()


# ---- trainer.fsdp.async_save: which saves may leave the training thread -----------------------
def test_requeue_and_unwinding_saves_stay_synchronous(tmp_path: Path) -> None:
    """SLURM's requeue save (named by Lightning itself), a save while an exception unwinds the fit
    (the SIGTERM save) and one outside a fit are on disk when they return; a validation's may not be."""
    from concurrent.futures import Future

    from torch.distributed.checkpoint.state_dict_saver import AsyncSaveResponse

    from gptlab.config import FSDPConfig
    from gptlab.training.dcp_async import upload_future
    from gptlab.training.strategies import must_save_now

    trainer = L.Trainer(logger=False, enable_checkpointing=False, default_root_dir=str(tmp_path))
    requeue = Path(trainer._checkpoint_connector.hpc_save_path(str(tmp_path)))
    assert must_save_now(requeue) and not must_save_now(tmp_path / "last.ckpt")
    try:
        raise SystemExit(143)
    except SystemExit:
        assert must_save_now(tmp_path / "last.ckpt")
    strategy = build_strategy(TrainerConfig(strategy="fsdp", fsdp=FSDPConfig(async_save=True)), 2)
    assert strategy.async_save and not build_strategy(TrainerConfig(strategy="fsdp"), 2).async_save
    assert not strategy._fit_running()  # no fit, no teardown to finish a save: it stays synchronous
    # torch 2.13 returns a Future, or with an asynchronous stager an AsyncSaveResponse (2.11 too)
    staged, written = Future(), Future()
    assert upload_future(written) is written
    assert upload_future(AsyncSaveResponse(staging_completion=staged, upload_completion=written)) is written
