"""A plan: one setup on one GPU, measured (memory on fake tensors) and costed (FLOPs, step time).

Every number that depends on memory comes from `step.measure`, including the alternatives offered
when a setup does not fit: each is planned again on fake tensors, none is scaled from another.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch

from gptlab.analysis.params import by_component
from gptlab.hardware import GPU, GPUS
from gptlab.model import GPT, GPTConfig
from gptlab.planning.mfu import MFURow, table_mfu
from gptlab.planning.step import Memory, Setup, measure
from gptlab.training.callbacks.throughput import compute_type

GIB = 2**30
# fraction of a GPU's memory kept free for what the trackers do not see: the peak is allocated
# bytes, a GPU run reserves more (caching-allocator segments, fragmentation). Sized from torchtitan's
# published H100 runs, whose max_memory_reserved is up to 1.25x the plan of the same step
# (1 - 1/1.253, rounded up: tests/planning/test_published_anchors.py)
HEADROOM = 0.21
MAX_DEVICES = 64  # "more devices" tries FSDP2 up to this many (8 nodes of 8)


def usable_bytes(gpu: GPU, headroom: float = HEADROOM) -> int:
    """Memory a run may plan to use: the GPU's, less the headroom fraction (the caching
    allocator's reserve beyond the tensors, CUDA context, cuBLAS and NCCL workspaces: none of them
    is a tensor)."""
    return int(gpu.memory_gib * GIB * (1.0 - headroom))


@dataclass(frozen=True)
class Speed:
    mfu: float
    source: str  # "plan.mfu" or the MFU table row's citation
    flops_per_step: int  # model FLOPs (no recompute)
    recompute: float  # hardware FLOPs / model FLOPs: 1 + (checkpointed blocks' share) / 3
    step_time: float  # seconds
    tokens_per_sec: float  # all devices


@dataclass(frozen=True)
class Plan:
    setup: Setup
    gpu: GPU
    memory: Memory
    usable: int  # bytes
    params: dict[str, int]  # by component, whole model (a tied matrix once)
    params_device: dict[str, int]  # by component, this rank's share (FSDP2 shard) or all
    flops_per_token: int
    speed: Speed | None  # None: no MFU given and none in the table for this GPU

    @property
    def fits(self) -> bool:
        return self.memory.peak <= self.usable

    @property
    def total_params(self) -> int:
        return sum(self.params.values())


@dataclass(frozen=True)
class Alternative:
    """A change that was planned again: the overrides that make it, and its plan."""

    what: str
    overrides: tuple[str, ...]
    plan: Plan
    note: str = ""


def param_counts(cfg: GPTConfig) -> tuple[dict[str, int], int]:
    """Parameters by component (the rows of gptlab.analysis.params) and the model's FLOPs per
    token (GPT.flops_per_token), from the model built on the meta device."""
    with torch.device("meta"):
        model = GPT(cfg)
    counts = by_component((name, p.numel()) for name, p in model.named_parameters())
    return counts, model.flops_per_token()


def recompute_factor(cfg: GPTConfig) -> float:
    """Hardware FLOPs over model FLOPs under activation checkpointing: each checkpointed block runs
    its forward (a third of its forward + backward) once more."""
    checkpoints = getattr(cfg, "checkpoints", None)
    if checkpoints is None:
        return 1.0
    share = sum(bool(checkpoints(i)) for i in range(cfg.n_layer)) / cfg.n_layer
    return 1.0 + share / 3.0


def speed(setup: Setup, gpu: GPU, flops_per_token: int, mfu: float | None, params: int) -> Speed | None:
    """Step time at an MFU: model FLOPs of the step × recompute over (devices × dense peak × MFU)."""
    source = "plan.mfu"
    if mfu is None:
        row: MFURow | None = table_mfu(gpu.name, params)
        if row is None:
            return None
        mfu, source = row.mfu, row.source
    kind = compute_type(setup.precision) or "fp32"
    flops = flops_per_token * setup.tokens_per_step
    recompute = recompute_factor(setup.model)
    step_time = flops * recompute / (setup.world_size * gpu.peak(kind) * mfu)
    return Speed(mfu, source, flops, recompute, step_time, setup.tokens_per_step / step_time)


def plan(setup: Setup, gpu: GPU, mfu: float | None = None, headroom: float = HEADROOM) -> Plan:
    """Measure `setup` on fake tensors and cost it on `gpu`."""
    params, fpt = param_counts(setup.model)
    memory = measure(setup)
    return Plan(
        setup=setup,
        gpu=gpu,
        memory=memory,
        usable=usable_bytes(gpu, headroom),
        params=params,
        params_device=by_component(memory.params_per_device.items()),
        flops_per_token=fpt,
        speed=speed(setup, gpu, fpt, mfu, sum(params.values())),
    )


def fits_nowhere(p: Plan, headroom: float = HEADROOM) -> str | None:
    """The one-line refusal when the setup's peak exceeds every listed GPU's usable memory."""
    largest = max(GPUS.values(), key=lambda g: g.memory_gib)
    room = usable_bytes(largest, headroom)
    if p.memory.peak <= room:
        return None
    m = p.memory
    parts = ", ".join(
        f"{name} {m.part(name) / GIB:.1f}"
        for name in ("parameters", "gradients", "optimizer", "activations", "temporaries")
    )
    s = p.setup
    how = f"FSDP2 over {s.world_size}" if s.fsdp else f"{s.world_size} device(s), unsharded"
    shard = " or shard it: trainer=fsdp trainer.devices=<n>" if fsdp_refusal(s) is None else ""
    return (
        f"this config needs {m.peak / GIB:.1f} GiB per device at its peak ({parts} GiB; micro-batch "
        f"{s.micro_batch}, {how}) and no listed GPU has that much: the largest, {largest.name}, has "
        f"{room / GIB:.1f} GiB usable ({largest.memory_gib:g} GiB less {headroom:.0%} headroom); shrink "
        f"data.batch_size{',' if shard else ' or'} set model.activation_checkpointing=full{shard}"
    )


def fsdp_refusal(s: Setup) -> str | None:
    """Why training refuses FSDP2 for this setup (optim=muon), in training's words; None: it runs."""
    try:
        s.replace(fsdp=True, world_size=max(2, s.world_size))
    except ValueError as err:
        return str(err)
    return None


MAX_MICRO_BATCH = 1 << 16  # the micro-batch search's ceiling (sequences per device)


def largest_micro_batch(
    setup: Setup, gpu: GPU, mfu: float | None, headroom: float, divides: int | None = None
) -> Plan | None:
    """The plan of the largest micro-batch that fits (each candidate measured); with `divides`,
    only micro-batches dividing it (to keep a global batch through accumulation). None: not even 1.

    Memory grows about linearly with the micro-batch, so two measurements (at 1 and 2) place the
    first candidate; from there the search gallops up (doubling its step) while candidates fit, then
    bisects between the largest that fits and the smallest that does not: O(log n) fake steps even
    when the linear guess is far off (a 1B model's guess of 488 sat 30 above what fits)."""
    room = usable_bytes(gpu, headroom)
    measured: dict[int, Plan] = {}

    def at(b: int) -> Plan:
        if b not in measured:
            measured[b] = plan(setup.replace(micro_batch=b), gpu, mfu, headroom)
        return measured[b]

    if not at(1).fits:
        return None
    slope = max(at(2).memory.peak - at(1).memory.peak, 1)
    # capped: a peak that does not grow from 1 to 2 (the step's peak outside forward and backward,
    # as a mis-counted FSDP2 clip once made it: docs/pitfalls.md) would otherwise guess billions;
    # no run needs a micro-batch above MAX_MICRO_BATCH sequences
    guess = min(max(1, 1 + (room - at(1).memory.peak) // slope), MAX_MICRO_BATCH // 2)
    if divides is not None:
        candidates = [b for b in range(1, divides + 1) if divides % b == 0]
    else:
        candidates = list(range(1, max(2 * guess, 4) + 1))
    fit = 0  # index of the largest candidate known to fit (candidates[0] is 1)
    if len(candidates) > 1 and candidates[1] == 2 and at(2).fits:
        fit = 1
    i = max((k for k, b in enumerate(candidates) if b <= guess), default=0)
    miss: int | None = None  # index of the smallest candidate known not to fit
    if at(candidates[i]).fits:
        fit, step = max(fit, i), 1
        while miss is None:
            if fit == len(candidates) - 1:
                if divides is not None or candidates[-1] >= MAX_MICRO_BATCH:
                    break  # the largest candidate fits
                candidates += list(range(candidates[-1] + 1, 2 * candidates[-1] + 1))
            j = min(fit + step, len(candidates) - 1)
            if at(candidates[j]).fits:
                fit, step = j, step * 2
            else:
                miss = j
    else:
        miss = i
    if miss is not None:
        while miss - fit > 1:
            mid = (fit + miss) // 2
            if at(candidates[mid]).fits:
                fit = mid
            else:
                miss = mid
    return at(candidates[fit])


def restate(p: Plan, setup: Setup, mfu: float | None) -> Plan:
    """`p` for a setup that differs only in what the measured step does not see (accumulate beyond
    2: the step runs min(accumulate, 2) micro-batches), with its speed recomputed."""
    if p.setup.replace(accumulate=min(p.setup.accumulate, 2)) != setup.replace(
        accumulate=min(setup.accumulate, 2)
    ):
        raise ValueError("restate: the setups differ in what the measured step sees; plan it again")
    return dataclasses.replace(
        p, setup=setup, speed=speed(setup, p.gpu, p.flops_per_token, mfu, p.total_params)
    )


def alternatives(p: Plan, mfu: float | None, headroom: float) -> list[Alternative]:
    """What would fit, each planned again: a smaller micro-batch with more accumulation (the same
    tokens per step), activation checkpointing, more devices (FSDP2, unless training refuses it:
    fsdp_refusal), and the listed GPUs on which the setup fits as it is."""
    s, out = p.setup, []
    gpu = p.gpu
    global_batch = s.micro_batch * s.accumulate
    if s.micro_batch > 1:
        # accumulate >= 2 from here on: the measured step keeps the first micro-batch's gradients
        smaller = largest_micro_batch(s.replace(accumulate=2), gpu, mfu, headroom, divides=global_batch)
        if smaller is not None and smaller.setup.micro_batch < s.micro_batch:
            b = smaller.setup.micro_batch
            acc = global_batch // b
            again = restate(smaller, s.replace(micro_batch=b, accumulate=acc), mfu)
            out.append(
                Alternative(
                    f"micro-batch {b} × accumulate {acc} (same tokens per step)",
                    (f"data.batch_size={b}", f"trainer.accumulate_grad_batches={acc}"),
                    again,
                )
            )
    if hasattr(s.model, "activation_checkpointing") and s.model.activation_checkpointing != "full":
        modes = ["selective", "full"] if s.model.activation_checkpointing == "none" else ["full"]
        for mode in modes:
            cfg = dataclasses.replace(s.model, activation_checkpointing=mode)
            again = plan(s.replace(model=cfg), gpu, mfu, headroom)
            extra = ""
            if mode == "selective":
                k = cfg.activation_checkpointing_every
                extra = f" (every {k}th block: model.activation_checkpointing_every={k})"
            out.append(
                Alternative(
                    f"activation checkpointing {mode}{extra}",
                    (f"model.activation_checkpointing={mode}",),
                    again,
                )
            )
            if again.fits:
                break
    n = s.world_size if s.fsdp else max(2, s.world_size)
    if s.fsdp:
        n *= 2
    while n <= MAX_DEVICES and fsdp_refusal(s) is None:
        again = plan(s.replace(fsdp=True, world_size=n), gpu, mfu, headroom)
        overrides = (
            ("trainer=fsdp", f"trainer.devices={n}")
            if n <= 8
            else (
                "trainer=fsdp",
                "trainer.devices=8",
                f"trainer.num_nodes={n // 8}",
            )
        )
        note = f"tokens per step ×{n / s.world_size:g}" if n != s.world_size else ""
        out.append(Alternative(f"FSDP2 over {n} devices", overrides, again, note))
        if again.fits:
            break
        n *= 2
    bigger = [g for g in GPUS.values() if p.memory.peak <= usable_bytes(g, headroom) and g != gpu]
    if bigger:
        g = min(bigger, key=lambda g: g.memory_gib)
        moved = dataclasses.replace(
            p,
            gpu=g,
            usable=usable_bytes(g, headroom),
            speed=speed(s, g, p.flops_per_token, mfu, p.total_params),
        )
        out.append(Alternative(f"a GPU it fits as it is: {g.name}", (f"plan.gpu='{g.name}'",), moved))
    return out


@dataclass(frozen=True)
class BudgetTime:
    tokens: float
    steps: int
    seconds: float


def budget(p: Plan, tokens: float) -> BudgetTime | None:
    if p.speed is None:
        return None
    steps = math.ceil(tokens / p.setup.tokens_per_step)
    return BudgetTime(tokens, steps, steps * p.speed.step_time)
