"""One training step run on fake tensors under torch's memory trackers: the planner's measurement.

`measure(setup)` builds gptlab's own LightningModule under `FakeTensorMode` (tensors with shapes,
dtypes and storages but no data: nothing is allocated, a 7B shape takes seconds), shards it with
FSDP2 over a fake process group when the setup is FSDP (`torch.testing._internal.distributed.
fake_pg`: collectives return at once, with the right shapes), and runs one optimizer step:
`GPTLightningModule._loss` (the run's loss, logits cast to fp32) under the precision's autocast,
backward per micro-batch, global-norm clipping, the run's optimizer (`training.optim.build_optimizer`:
fused AdamW as on a GPU, or under optim.name=muon Muon on the hidden matrices and AdamW on the rest),
zero_grad. By default the step is a telemetry log step (`Setup.log_step`), the costliest a run
takes: `LayerTelemetry`'s own hooks arm the first micro-batch's forward (q and k kept for the
attention statistics, act_rms, the module's logit moments over the fp32 logits) and copy the weights
before the update; with `task_batch` the in-loop tasks' scoring forward follows, with the step's
gradients alive as Lightning keeps them until the next step. torch's
trackers (`MemTracker`; `FSDPMemTracker` for FSDP2, which also sees all-gather and reduce-scatter
buffers and unsharded parameters; planning.trackers keeps only their device's peak) attribute every
storage alive at the step's peak; that split is `Memory`. torchtitan's memory estimator
(scripts/estimate/estimation.py) is the same idea.

The fake step runs on CPU (fake CUDA tensors need a CUDA build of torch); for a CUDA target
(`Setup.device`, the default) its norms run as CUDA runs them (`planning.norms`: what the fused
RMSNorm kernel saves, and CUDA autocast's fp32 norms). What it leaves out, by construction: the CUDA
context, cuBLAS/NCCL workspaces and the caching allocator's reserve (the peak is allocated bytes; the
planner's headroom stands for the rest, sized from published runs: tests/planning/
test_published_anchors.py), and any other op whose CPU and CUDA autocast policies differ.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from gptlab.config import OptimConfig, muon_refusals
from gptlab.model import GPTConfig
from gptlab.planning.norms import as_cuda
from gptlab.training.callbacks.throughput import tokens_per_step

PRECISIONS = ("32-true", "bf16-mixed", "16-mixed", "bf16-true")
DEVICES = ("cuda", "cpu")
# how each tracker category counts in the plan (MemTracker's names, then FSDPMemTracker's)
CATEGORY = {
    "Parameter": "parameters",
    "Sharded Param": "parameters",
    "Unsharded Param": "parameters",
    "Gradient": "gradients",
    "Sharded Grad": "gradients",
    "Unsharded Grad": "gradients",
    "Optstate": "optimizer",
    "OptState": "optimizer",
    "Activation": "activations",
    "Temp": "temporaries",
    "All Gather": "temporaries",
    "Reduce Scatter": "temporaries",
    "Buffer": "other",
    "Other": "other",
    "Inputs": "other",
}
# attention statistics' chunks of sequences the fake log step runs per layer: from the second on
# each allocates what the second did, so two give every chunk's peak in 2 of B chunks' fake ops
# (at T 2048 a chunk is one sequence: B of them was most of a large micro-batch's fake step);
# tests/planning/test_fast_fake_step.py checks two against all
STAT_CHUNKS = 2
PARTS = ("parameters", "gradients", "optimizer", "activations", "temporaries", "other")


@dataclass(frozen=True)
class Setup:
    """What one device runs in one optimizer step: the model, the optimizer, the batch, the
    parallelism and the precision (already resolved: no "auto")."""

    model: GPTConfig
    optim: OptimConfig
    micro_batch: int
    accumulate: int = 1
    world_size: int = 1
    fsdp: bool = False
    precision: str = "bf16-mixed"
    fsdp_mixed_precision: bool = True
    reshard_after_forward: bool = True
    vocab_source: str = ""  # where model.vocab_size came from (planning.vocab), for the report
    # what the step runs on: "cuda" (every listed GPU; norms as CUDA runs them, planning.norms) or
    # "cpu" (norms as the fake step's own CPU runs them: what a real CPU step is compared with)
    device: str = "cuda"
    # a telemetry log step (callbacks.telemetry: its act_rms and attention families as configured);
    # False: a plain step
    log_step: bool = True
    act_rms: bool = True
    attention: bool = True
    task_batch: int = 0  # callbacks.tasks.batch_size when tasks are scored (0: none)
    # tokens a scoring request holds: the built-in val_continuation's 64 + 16, a task file's up to the
    # block (its lengths are unknown until it is read); never more than block_size (0: block_size)
    task_tokens: int = 0
    # data.document_mask's record ({"eot", "positions"}, data/documents.py) or None: the model then
    # builds a (B, 1, T, T) same-document mask each forward, and the plan counts it
    documents: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if isinstance(self.task_batch, bool) or not isinstance(self.task_batch, int) or self.task_batch < 0:
            raise ValueError(f"callbacks.tasks.batch_size={self.task_batch!r} cannot be planned")
        for key, value in (
            ("data.batch_size", self.micro_batch),
            ("trainer.accumulate_grad_batches", self.accumulate),
            ("trainer.devices × trainer.num_nodes", self.world_size),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{key}={value!r} cannot be planned; give a positive integer")
        if self.device not in DEVICES:
            raise ValueError(f"device={self.device!r} cannot be planned; accepted: {', '.join(DEVICES)}")
        if self.precision not in PRECISIONS:
            raise ValueError(
                f"trainer.precision={self.precision!r} cannot be planned; accepted: auto, "
                + ", ".join(PRECISIONS)
            )
        if self.optim.name == "muon":  # what training refuses (FSDP2, μP), in its words
            muon_refusals(self.model.parametrization, "fsdp" if self.fsdp else "auto")

    @property
    def tokens_per_step(self) -> int:
        return tokens_per_step(self.micro_batch, self.model.block_size, self.accumulate, self.world_size)

    def replace(self, **changes: Any) -> Setup:
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True)
class Memory:
    """Bytes per device alive at the step's peak, by what they hold; `peak` is their sum.
    `tracker` keeps the tracker's own categories at that moment."""

    parameters: int
    gradients: int
    optimizer: int
    activations: int
    temporaries: int
    other: int
    peak: int
    tracker: dict[str, int] = field(default_factory=dict)
    params_per_device: dict[str, int] = field(default_factory=dict)  # numel by parameter name
    seconds: float = 0.0  # how long the fake step took here

    def part(self, name: str) -> int:
        return int(getattr(self, name))


def split(snapshot: dict[Any, int], state: int | None = None) -> dict[str, int]:
    """A tracker's peak snapshot of one device in the plan's parts (plus 'peak', the tracker's
    own total); a category the planner does not know is an error, not a silent omission.

    `state`: the bytes of the optimizer's state. The tracker counts as "Optstate" every tensor the
    optimizer's step allocates, so a peak inside the step (Muon's, on a small batch) holds its
    transients there too (Nesterov's blend, the bfloat16 Newton–Schulz iterate and its Gram
    products); what exceeds the state moves to temporaries, the peak unchanged."""
    parts = dict.fromkeys(PARTS, 0)
    for key, value in snapshot.items():
        name = str(getattr(key, "value", key))
        if name == "Total":
            continue
        if name not in CATEGORY:
            raise RuntimeError(f"memory tracker category {name!r} is not mapped in planning.step.CATEGORY")
        parts[CATEGORY[name]] += int(value)
    if state is not None and parts["optimizer"] > state:
        parts["temporaries"] += parts["optimizer"] - state
        parts["optimizer"] = state
    parts["peak"] = int(snapshot["Total"])
    return parts


def state_bytes(opt: torch.optim.Optimizer) -> int:
    """Bytes of the optimizer's state on this device (rank 0's shard of a DTensor): AdamW's two
    moments and step count per parameter, Muon's momentum buffer per matrix."""
    total = 0
    for state in opt.state.values():
        for t in state.values():
            if isinstance(t, torch.Tensor):
                local = t.to_local() if hasattr(t, "to_local") else t
                total += local.numel() * local.element_size()
    return total


@contextlib.contextmanager
def fake_process_group(world_size: int) -> Iterator[Any]:
    """A process group of `world_size` ranks in which this process is rank 0 and collectives do
    nothing (the "fake" backend), and its 1-D device mesh; destroyed on exit."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.testing._internal.distributed.fake_pg import FakeStore

    if dist.is_initialized():
        raise RuntimeError("the planner needs its own process group; one is already initialised here")
    dist.init_process_group("fake", rank=0, world_size=world_size, store=FakeStore())
    try:
        yield init_device_mesh("cpu", (world_size,))
    finally:
        dist.destroy_process_group()


def autocast(precision: str) -> contextlib.AbstractContextManager:
    """Lightning's mixed precision is autocast around the training step (forward and loss)."""
    if precision == "bf16-mixed":
        return torch.autocast("cpu", dtype=torch.bfloat16)
    if precision == "16-mixed":
        return torch.autocast("cpu", dtype=torch.float16)
    return contextlib.nullcontext()


def cast(model: torch.nn.Module, dtype: torch.dtype) -> None:
    """`model.to(dtype)`, as Lightning's bf16-true casts the module: every floating parameter and
    buffer. torch 2.13's Module._apply swaps a FakeTensor parameter for its cast copy
    (torch.utils.swap_tensors), which fails on fake tensors ("Couldn't swap Embedding.weight");
    setting `.data` casts the same tensors."""
    with torch.no_grad():
        for t in (*model.parameters(), *model.buffers()):
            if t.is_floating_point():
                t.data = t.data.to(dtype)


def shard(model: torch.nn.Module, mesh: Any, setup: Setup) -> None:
    """FSDP2 as `training.strategies.parallelize` applies it (the same function: each block, then
    the root), with the precision's MixedPrecisionPolicy."""
    from gptlab.training.strategies import mixed_precision_policy, shard_blocks_then_root

    mp = mixed_precision_policy(setup.precision, setup.fsdp_mixed_precision)
    shard_blocks_then_root(model, mesh, mp, setup.reshard_after_forward)


def init_optimizer_state(model: torch.nn.Module, opt: torch.optim.Optimizer, setup: Setup) -> None:
    """AdamW creates its moments (Muon its momentum buffers) at its first step; an update on zero
    gradients creates them before the measured step, so its peak holds them as every later step's
    does.

    The update clips as the measured one does. Under FSDP2 that matters: DTensor's first call of an
    op on a placement runs it on fake tensors of the *global* shape to propagate shardings (cached
    afterwards). On a GPU those are never allocated; under the planner's trackers they are, and the
    first clip of a 7B model's gradients counted the whole model in fp32 (25 GiB a device) as the
    step's peak. Warmed here, the measured step sees only what a real step allocates.

    The gradients stay: Lightning sets them to None inside the next step's closure, after its
    first micro-batch's forward and before its backward (automatic optimization's zero_grad_fn),
    so every step but a run's first holds the previous step's gradients through that forward."""
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    update(model, opt, setup, zero_grad=False)


def update(model: torch.nn.Module, opt: torch.optim.Optimizer, setup: Setup, zero_grad: bool = True) -> None:
    """What follows the last backward of a step: global-norm clipping, the optimizer (and zero_grad,
    which a Lightning run does in the next step instead)."""
    if setup.optim.grad_clip > 0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), setup.optim.grad_clip, foreach=True)
    opt.step()
    if zero_grad:
        opt.zero_grad(set_to_none=True)


def train_step(
    module: Any,
    opt: torch.optim.Optimizer,
    batch: torch.Tensor,
    setup: Setup,
    tracker: Any = None,
    telemetry: Any = None,
) -> None:
    """One optimizer step as the Lightning loop runs it: each micro-batch's loss under autocast and
    its backward (scaled by 1/accumulate; the previous step's gradients set to None between the
    first micro-batch's loss and its backward, where Lightning's closure does it), clipping, the
    update. Two micro-batches stand
    for any accumulate >= 2: from the second on, the gradients of the first stay alive through
    forward and backward, and a third finds the memory the second found.

    With `telemetry` (a `LayerTelemetry`) the step is its log step, through the callback's own
    hooks: `arm` before the first micro-batch's forward (on_train_batch_start), `disarm` before its
    backward (on_before_backward), the weights copied before clipping and the update
    (on_before_optimizer_step, which Lightning calls before configure_gradient_clipping) and
    their norms taken after it (on_train_batch_end)."""
    for i in range(min(setup.accumulate, 2)):
        if tracker is not None:  # per-module stats are per call; the peak is kept
            tracker.reset_mod_stats()
        if telemetry is not None and i == 0:
            telemetry.arm(module, attention=setup.attention)
        with autocast(setup.precision):
            loss = module._loss(batch)
        if telemetry is not None and i == 0:
            telemetry.disarm(module)
        if i == 0:
            opt.zero_grad(set_to_none=True)
        (loss / setup.accumulate).backward()
        del loss
    before = telemetry.weights_before() if telemetry is not None else None
    update(module.model, opt, setup)
    if before is not None:
        telemetry.update_sq(before)
        del before


def score_batch(module: Any, setup: Setup, tracker: Any = None) -> None:
    """The in-loop tasks' largest scoring forward (callbacks/tasks.py, evaluation/scoring.py):
    `task_batch` requests of `task_tokens` (at most block_size) tokens under no_grad and the
    precision's autocast, and one row's continuation through an fp32 log_softmax (a continuation
    as long as the request: the most a row holds). It runs at a validation, with the last step's
    gradients alive (Lightning frees them in the next step, before its backward)."""
    model = module.model
    if tracker is not None:
        tracker.reset_mod_stats()
    for p in model.parameters():
        if p.grad is None:
            p.grad = torch.zeros_like(p)
    tokens = min(setup.task_tokens or setup.model.block_size, setup.model.block_size)
    idx = torch.zeros((setup.task_batch, tokens), dtype=torch.long)
    was = model.training
    model.eval()
    with torch.inference_mode(), autocast(setup.precision):
        logits = model(idx)
        torch.log_softmax(logits[0].float(), dim=-1)
        del logits
    model.train(was)
    for p in model.parameters():
        p.grad = None


def measure(setup: Setup) -> Memory:
    """Peak memory per device of one training step of `setup`, measured on fake tensors."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from gptlab.planning.trackers import tracker_for
    from gptlab.training.module import GPTLightningModule
    from gptlab.training.optim import build_optimizer

    t0 = time.perf_counter()
    group = fake_process_group(setup.world_size) if setup.fsdp else contextlib.nullcontext()
    with group as mesh, FakeTensorMode():
        module = GPTLightningModule(
            model=dataclasses.asdict(setup.model),
            optim=dataclasses.asdict(setup.optim),
            documents=setup.documents,
        )
        model = module.model
        if setup.precision == "bf16-true":
            cast(model, torch.bfloat16)
        if setup.fsdp:
            shard(model, mesh, setup)
        opt = build_optimizer(model, setup.optim, "cuda")  # the run's optimizer; AdamW fused, as on a GPU
        init_optimizer_state(model, opt, setup)
        T = setup.model.block_size
        batch = torch.randint(0, setup.model.vocab_size, (setup.micro_batch, T + 1))
        tracker = tracker_for(model, opt, batch, setup.fsdp)
        norms = as_cuda(model) if setup.device == "cuda" else contextlib.nullcontext()
        telemetry = _telemetry(module, setup)
        with norms, tracker:
            train_step(module, opt, batch, setup, tracker, telemetry)
            if setup.task_batch:
                score_batch(module, setup, tracker)
        (device_snapshot,) = tracker.get_tracker_snapshot("peak").values()
        local = {name: _local_numel(p) for name, p in model.named_parameters()}
        state = state_bytes(opt)
    parts = split(device_snapshot, state)
    tracked = {str(getattr(k, "value", k)): int(v) for k, v in device_snapshot.items()}
    return Memory(**parts, tracker=tracked, params_per_device=local, seconds=time.perf_counter() - t0)


def _telemetry(module: Any, setup: Setup) -> Any:
    """The run's LayerTelemetry, its group index built (as at a run's first batch); None: a plain step."""
    if not setup.log_step:
        return None
    from gptlab.training.callbacks.telemetry import LayerTelemetry

    telemetry = LayerTelemetry(every=1, act_rms=setup.act_rms, attention=setup.attention, figures=False)
    telemetry.stat_chunks = STAT_CHUNKS
    telemetry._build_index(module)
    return telemetry


def _local_numel(p: torch.Tensor) -> int:
    """Elements this rank holds: its FSDP2 shard (rank 0's, the largest: padding goes last) or all."""
    to_local = getattr(p, "to_local", None)
    return int(to_local().numel()) if to_local is not None else int(p.numel())
