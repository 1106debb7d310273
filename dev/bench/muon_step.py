"""Ops and host time of one optim=muon step at a model's shape: torch.optim.Muon (one matrix at a
time) against gptlab's BatchedMuon (stacked per shape), with the non-finite guard as the module runs it.

Ops: every aten op one `opt.step()` dispatches, counted with a TorchDispatchMode (each is a kernel
launch on a GPU). Host ms, two proxies for what a GPU's host spends while the device works: the step
on the `meta` device (every op dispatched at the real shape, none computed; meta kernels written in
Python make it an upper bound), and the step on CPU tensors with the same matrices at d = 16 (the
same ops, compute negligible).
Host reads: every `.item()`/`bool()`… of a tensor in guard + step under the CUDA configuration
(fused AdamW, run on CPU tensors of the tiny shape).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from gptlab.config import OptimConfig
from gptlab.model import GPT, GPTConfig
from gptlab.training.callbacks.nonfinite import NonFiniteGuard
from gptlab.training.optim import MuonAdamW, build_optimizer, is_muon_param

SHAPES = {
    # GPT-2 124M: GELU MLP, so 72 hidden matrices (q, k, v, out, up, down per block)
    "gpt2": dict(n_layer=12, n_embd=768, n_head=12, block_size=1024, vocab_size=50257, ffn="gelu"),
    "tiny": dict(n_layer=2, n_embd=64, n_head=2, block_size=32, vocab_size=256),
}
READS = {"item", "tolist", "__float__", "__int__", "__bool__", "__index__", "numpy", "cpu"}


class Ops(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.n = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self.n += 1
        return func(*args, **(kwargs or {}))


class Reads(TorchFunctionMode):
    def __init__(self) -> None:
        super().__init__()
        self.n = 0

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self.n += getattr(func, "__name__", "") in READS
        return func(*args, **(kwargs or {}))


def optimizer(model: GPT, batched: bool, device_type: str) -> Any:
    opt = build_optimizer(model, OptimConfig(name="muon", lr=1e-3), device_type)
    if not batched:  # last round's: torch's own Muon on the same groups, the guard's flag read on the host
        opt.__class__ = type("Before", (MuonAdamW,), {"takes_found_inf": False})
        m = opt.muon
        opt.muon = torch.optim.Muon(
            m.param_groups[0]["params"], **{k: v for k, v in m.param_groups[0].items() if k != "params"}
        )
        opt.muon.__setstate__(
            {"state": opt.state, "param_groups": opt.param_groups[len(opt.adamw.param_groups) :]}
        )
        opt.muon.param_groups[0].update({k: v for k, v in m.param_groups[0].items() if k != "params"})
    return opt


def model_on(shape: str, device: str, width: int | None = None) -> GPT:
    """The shape's model; `width`: the same layers and matrices at d = width (compute negligible)."""
    kw = dict(SHAPES[shape])
    if width is not None:
        kw.update(n_embd=width, n_head=1, vocab_size=256, block_size=32)
    with torch.device(device):
        return GPT(GPTConfig(**kw))


def grads(model: GPT) -> None:
    for p in model.parameters():
        p.grad = torch.randn_like(p) * 1e-3 if p.device.type != "meta" else torch.empty_like(p)


def one_step(model: GPT, opt: Any, guard: NonFiniteGuard, step: int) -> None:
    guard.total_norm(model.named_parameters(), opt, step)
    opt.step()


def measure(shape: str, batched: bool, rounds: int) -> dict[str, float]:
    out: dict[str, float] = {}
    meta = model_on(shape, "meta")
    opt = optimizer(meta, batched, "cpu")
    grads(meta)
    one = opt.muon.step
    one()  # state created
    with Ops() as ops:
        one()
    out["muon_ops"] = ops.n
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        one()
        times.append(time.perf_counter() - t0)
    out["muon_host_ms"] = 1000 * statistics.median(times)
    small = model_on(shape, "cpu", width=16)  # the shape's matrix count, negligible compute
    sopt = optimizer(small, batched, "cpu")
    grads(small)
    sopt.muon.step()
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        sopt.muon.step()
        times.append(time.perf_counter() - t0)
    out["small_host_ms"] = 1000 * statistics.median(times)
    cpu = model_on("tiny", "cpu")  # host reads do not depend on the shape; a real step does
    copt = optimizer(cpu, batched, "cuda")
    grads(cpu)
    g = NonFiniteGuard()
    one_step(cpu, copt, g, 0)
    with Reads() as reads:
        one_step(cpu, copt, g, 1)
    out["host_reads_per_step"] = reads.n
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", choices=sorted(SHAPES), default="gpt2")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args(argv)
    torch.manual_seed(0)
    rows = {
        name: measure(args.shape, batched, args.rounds)
        for name, batched in (("torch.optim.Muon", False), ("BatchedMuon", True))
    }
    n = sum(1 for n, p in model_on(args.shape, "meta").named_parameters() if is_muon_param(n))
    print(f"shape {args.shape}: {n} hidden matrices; Muon half of one step (AdamW half not counted)")
    print("| optimizer | aten ops | host ms (meta) | host ms (CPU, d = 16) | host reads (guard + step) |")
    print("|---|---|---|---|---|")
    for name, r in rows.items():
        print(
            f"| {name} | {r['muon_ops']:.0f} | {r['muon_host_ms']:.1f} | {r['small_host_ms']:.1f} | "
            f"{r['host_reads_per_step']:.0f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
