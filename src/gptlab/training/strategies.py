"""Parallelism lives here, not in the model: the Lightning strategy, FSDP2 sharding, compile.

FSDP2 runs through Lightning's ModelParallelStrategy (data parallel = world size, tensor parallel =
1), subclassed so that its distributed checkpoint (a directory: one shard file per rank plus
Lightning's `meta.pt`) is written atomically and resumes through the module's checkpoint checks;
with trainer.fsdp.async_save the write runs off the training thread (gptlab.training.dcp_async).
Under SLURM the strategy carries Lightning's SLURMEnvironment with auto-requeue on SIGUSR1.
"""

from __future__ import annotations

import logging
import shutil
import signal
import sys
from functools import partial
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from lightning.fabric.plugins.environments import (
    ClusterEnvironment,
    SLURMEnvironment,
    TorchElasticEnvironment,
)
from lightning.pytorch.strategies import DDPStrategy, ModelParallelStrategy, Strategy
from lightning.pytorch.trainer.states import TrainerStatus

from gptlab.config import STRATEGIES, TrainerConfig
from gptlab.training import dcp_async

log = logging.getLogger(__name__)
REQUEUE_SIGNAL = signal.SIGUSR1  # what `#SBATCH --signal=USR1@<seconds>` sends before the time limit


def world_size(cfg: TrainerConfig, devices: int) -> int:
    return devices * cfg.num_nodes


def cluster_environment() -> ClusterEnvironment | None:
    """Under srun: SLURMEnvironment that saves `hpc_ckpt_<n>.ckpt` and requeues on SIGUSR1.

    torchrun inside a SLURM allocation keeps Lightning's own choice (TorchElastic comes first).
    """
    if TorchElasticEnvironment.detect() or not SLURMEnvironment.detect():
        return None
    return SLURMEnvironment(auto_requeue=True, requeue_signal=REQUEUE_SIGNAL)


def build_strategy(cfg: TrainerConfig, devices: int) -> Strategy | str:
    """auto (one device, or DDP when there are several) | ddp | fsdp (FSDP2, data parallel only)."""
    if cfg.strategy not in STRATEGIES:
        raise ValueError(f"trainer.strategy={cfg.strategy!r} is not accepted; choose one of {STRATEGIES}")
    env = cluster_environment()
    if cfg.strategy == "fsdp":
        # data_parallel_size="auto" would mean number of nodes, with tensor parallel inside a node
        strategy = FSDP2Strategy(
            data_parallel_size=world_size(cfg, devices),
            tensor_parallel_size=1,
            save_distributed_checkpoint=True,
            async_save=cfg.fsdp.async_save,
        )
        strategy.cluster_environment = env
        return strategy
    if cfg.strategy == "ddp" or world_size(cfg, devices) > 1:
        return DDPStrategy(gradient_as_bucket_view=True, cluster_environment=env)
    # one process: Lightning picks SLURMEnvironment() itself under srun, with the same defaults
    return "auto"


class FSDP2Strategy(ModelParallelStrategy):
    """ModelParallelStrategy with atomic distributed checkpoints that resume through on_load_checkpoint,
    written off the training thread when `async_save` (finished at the next save and at teardown)."""

    def __init__(self, *args: Any, async_save: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.async_save = async_save
        self._pending: dcp_async.PendingSave | None = None
        self._save_group: Any = None  # made by the first asynchronous save, on every rank

    def save_checkpoint(
        self, checkpoint: dict[str, Any], filepath: Any, storage_options: Any | None = None
    ) -> None:
        """Write the shards to `.<name>.tmp`, then swap the directory in (rank zero, after all wrote);
        asynchronously, the swap waits for the next save or teardown."""
        if not self._save_distributed_checkpoint:
            super().save_checkpoint(checkpoint, filepath, storage_options)
            return
        self.finish_pending_save()  # the one before is whole (or refused) before another starts
        path = Path(self.broadcast(str(filepath)))
        tmp = path.with_name(f".{path.name}.tmp")
        if self.is_global_zero and tmp.exists():
            shutil.rmtree(tmp)  # left by a save that was interrupted
        self.barrier("gptlab_dcp_save_start")
        if self.async_save and self._fit_running() and not must_save_now(path):
            self._start_async(checkpoint, tmp, path)
            return
        super().save_checkpoint(checkpoint, tmp, storage_options)
        self.barrier("gptlab_dcp_save_written")
        if self.is_global_zero:
            swap_in(tmp, path)
        self.barrier("gptlab_dcp_save_done")

    def _fit_running(self) -> bool:
        """A save outside a running fit (trainer.save_checkpoint after it) has no teardown after it
        to finish it: it stays synchronous."""
        trainer = getattr(self.lightning_module, "_trainer", None)
        return trainer is not None and trainer.state.status == TrainerStatus.RUNNING

    def _start_async(self, checkpoint: dict[str, Any], tmp: Path, path: Path) -> None:
        """What ModelParallelStrategy.save_checkpoint writes (the model's and each optimizer's
        shards through DCP, the rest as rank zero's meta.pt), with DCP's write in a thread."""
        if self._save_group is None:
            self._save_group = dcp_async.save_group()
        state = {"state_dict": checkpoint.pop("state_dict")}
        state.update({f"optimizer_{i}": s for i, s in enumerate(checkpoint.pop("optimizer_states", []))})
        future = dcp_async.start(state, checkpoint, tmp, self._save_group, self.is_global_zero)
        self._pending = dcp_async.PendingSave(future, tmp, path)

    def finish_pending_save(self) -> None:
        """Complete the save in flight, if any: every rank waits for its write, the ranks agree all
        succeeded, rank zero swaps it in (raises AsyncSaveError, swapping nothing, when one failed).
        While an exception unwinds the fit, no collective: rank zero swaps on its own outcome."""
        pending, self._pending = self._pending, None
        if pending is None:
            return
        if sys.exc_info()[1] is not None:
            dcp_async.finish_quietly(pending, self.is_global_zero, swap_in)
            return
        agree = partial(self.reduce_boolean_decision, all=True)
        dcp_async.finish(pending, agree, self.barrier, self.is_global_zero, swap_in)

    def teardown(self) -> None:
        """The last save is finished before anything reads it (end of fit, or an exception)."""
        try:
            self.finish_pending_save()
        finally:
            super().teardown()

    def load_checkpoint(self, checkpoint_path: Any, weights_only: bool | None = None) -> dict[str, Any]:
        """Lightning loads a distributed checkpoint's weights straight into the model and hands the
        hooks only `meta.pt`; give on_load_checkpoint the state it now holds so its checks run."""
        self.finish_pending_save()
        checkpoint = super().load_checkpoint(checkpoint_path, weights_only=weights_only)
        if "state_dict" not in checkpoint and self.lightning_module is not None:
            checkpoint["state_dict"] = self.lightning_module.state_dict()
        return checkpoint


def must_save_now(path: Path) -> bool:
    """A save that must be on disk when it returns, even with async_save: SLURM's requeue save
    (Lightning's `hpc_ckpt_<n>.ckpt`: `scontrol requeue` follows, then the job is killed), and any
    save made while an exception unwinds the fit (the SIGTERM preemption save: the process exits)."""
    return path.name.startswith("hpc_ckpt_") or sys.exc_info()[1] is not None


def swap_in(new: Path, path: Path) -> None:
    """Replace `path` (a file or a directory) by the directory `new` with two renames."""
    old = path.with_name(f".{path.name}.old")
    if old.exists():
        shutil.rmtree(old) if old.is_dir() else old.unlink()
    if path.is_dir():
        path.rename(old)
    elif path.exists():
        path.unlink()
    new.rename(path)  # between the two renames only `.<name>.old` exists: it is the previous one
    if old.is_dir():
        shutil.rmtree(old, ignore_errors=True)


def _sum_then_divide(modules: list[Any], mesh: Any) -> None:
    """Reduce gradients with SUM and divide afterwards on gloo.

    FSDP2 asks for ReduceOp.AVG in its reduce-scatter; gloo has summed instead of averaging there
    (pytorch issue 162338: gradients world-size times too large). torch 2.13's gloo averages
    correctly, but the project accepts older torch, and SUM + divide is right on every release.
    """
    if dist.get_backend(mesh.get_group()) != "gloo":
        return
    for m in modules:
        if hasattr(m, "set_force_sum_reduction_for_comms"):
            m.set_force_sum_reduction_for_comms(True)
        else:
            log.warning(
                "this torch's FSDP2 cannot force SUM reductions: on gloo its gradient averaging may "
                "be wrong (pytorch issue 162338); use a newer torch for FSDP over gloo"
            )
            return


def parallelize(module: Any, fsdp: dict[str, Any] | None, compile_model: bool) -> None:
    """Called from LightningModule.configure_model: shard each block, then the root, then compile."""
    model = module.model
    if getattr(model, "_gptlab_parallelized", False):
        return
    mesh = (
        getattr(module, "device_mesh", None)
        if isinstance(module.trainer.strategy, ModelParallelStrategy)
        else None
    )
    if mesh is not None:
        fsdp = fsdp or {}
        dp_mesh = mesh["data_parallel"]
        mp = mixed_precision_policy(str(module.trainer.precision), bool(fsdp.get("mixed_precision", True)))
        # activation checkpointing is the model's own (model.activation_checkpointing, GPT.forward)
        shard_blocks_then_root(model, dp_mesh, mp, bool(fsdp.get("reshard_after_forward", True)))
        _sum_then_divide([*model.blocks, model], dp_mesh)
        if any(p.is_meta for p in model.parameters()):
            model.to_empty(device=module.trainer.strategy.root_device)
            model.reset_parameters()
    if compile_model:
        compile_blocks(model)
    model._gptlab_parallelized = True


def shard_blocks_then_root(model: Any, mesh: Any, mp_policy: Any, reshard_after_forward: bool) -> None:
    """FSDP2's units: one per block, then the root, which keeps the embedding, the final norm and
    the (tied) head together. The planner (planning.step.shard) shards through this same function,
    so what it measures is what training runs. An explicit `reshard_after_forward` reshards the
    root too (torch 2.13 keeps a root unsharded only when the argument is None); keeping it
    unsharded (False for the root) crashed FSDP2 training on gloo (exit 139) in issue 30's try."""
    from torch.distributed.fsdp import fully_shard

    for block in model.blocks:
        fully_shard(block, mesh=mesh, mp_policy=mp_policy, reshard_after_forward=reshard_after_forward)
    fully_shard(model, mesh=mesh, mp_policy=mp_policy, reshard_after_forward=reshard_after_forward)


def mixed_precision_policy(precision: str, enabled: bool) -> Any:
    """FSDP2's policy for the run's precision: with bf16 (`bf16-mixed`, `bf16-true`) and
    trainer.fsdp.mixed_precision, bf16 parameters (all-gathered as bf16, the forward and backward
    in bf16) and gradients reduce-scattered in fp32; otherwise the parameters' own dtype throughout.
    The same on a GPU and on CPU: gloo all-gathers bf16 (torch 2.13), so FSDP2 on CPU runs what
    FSDP2 on NCCL runs (tests/oracle/test_reference_loop.py, section 4)."""
    from torch.distributed.fsdp import MixedPrecisionPolicy

    if enabled and precision.startswith("bf16"):
        return MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    return MixedPrecisionPolicy()


def compile_blocks(model: Any) -> None:
    """torch.compile each block in place: identical blocks share one graph, and FSDP2's per-block
    hooks stay outside the compiled regions (also what gptlab.bench's bare loop runs). The loss
    after the head compiles as gptlab.training.loss.loss_fn; the head's matmul is one GEMM either
    way, and the final norm ((B, T, d), 1/65 of GPT-2's (B, T, V) logits) stays eager: a
    torch.nn norm compiled alone gives Dynamo no graph (torch 2.13 skips its frame). A MoE's loop
    path splits its rows by the tokens per expert: Dynamo traces those sizes as unbacked symbols
    (capture_scalar_outputs) instead of breaking the graph there (docs/moe.md, Compile)."""
    from gptlab.model.moe import moe_layers

    if moe_layers(model):
        torch._dynamo.config.capture_scalar_outputs = True
    for block in model.blocks:
        block.compile()
