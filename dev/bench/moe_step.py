"""CPU seconds per training step of each arm of an ablation preset, timed interleaved on one thread.

Why: "MoE is better per FLOP but slower per second" is a claim about step time, and on a shared
2-core machine two models timed minutes apart see different neighbours. So every arm keeps its own
model and optimizer, and each round times every arm once, back to back, in an order rotated each
round; the figure is this process's CPU time (one torch thread: time spent waiting for a core is not
counted), median over rounds. The step is the LightningModule's training step without Lightning:
forward, cross-entropy plus MoE's routing losses, backward, the step's expert loads, clipping at
the global norm, AdamW (with the expert-bias hook under balance=bias), zero_grad.

    python -m dev.bench.moe_step experiment=ablate_moe
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch

from gptlab.config import TrainConfig
from gptlab.model import GPT, moe


@dataclass
class Arm:
    """One arm's model, optimizer and batch stream, kept across rounds."""

    name: str
    model: GPT
    step: object  # a zero-argument callable running one training step
    cpu: list[float]  # CPU seconds per step, one per round
    wall: list[float]


def _batches(cfg: TrainConfig) -> Iterator[torch.Tensor]:
    from gptlab.data.datamodule import TokenDataModule

    dm = TokenDataModule(cfg.data, block_size=cfg.model.block_size, seed=cfg.seed)
    while True:  # a small corpus: start the stream again
        for batch in dm.train_dataloader():
            yield batch[0] if isinstance(batch, list | tuple) else batch


def build_arm(name: str, cfg: TrainConfig) -> Arm:
    """The arm's model (seeded as a run is), AdamW and one-step closure."""
    from gptlab.training.loss import loss_fn
    from gptlab.training.optim import build_optimizer

    torch.manual_seed(cfg.seed)
    model = GPT(cfg.model)
    model.train()
    opt = build_optimizer(model, cfg.optim, "cpu")
    if any(layer.mcfg.balance == "bias" for layer in moe.moe_layers(model)):
        opt.register_step_post_hook(lambda *_: moe.update_expert_bias(model))
    objective = loss_fn(False)
    batches = _batches(cfg)
    clip = cfg.optim.grad_clip

    def step() -> None:
        batch = next(batches)
        logits = model(batch[:, :-1])
        loss, _ = objective(logits, batch[:, 1:], 0.0)
        routing = moe.routing_loss(model)
        if routing is not None:
            loss = loss + routing
        loss.backward()
        moe.accumulate_load(model, fresh=True)
        if clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip, foreach=True)
        opt.step()
        opt.zero_grad(set_to_none=True)

    return Arm(name, model, step, [], [])


def time_round(arm: Arm, warmup: int, steps: int) -> None:
    """`warmup` untimed steps, then `steps` timed ones; appends CPU and wall seconds per step."""
    for _ in range(warmup):
        arm.step()  # type: ignore[operator]
    c0, w0 = time.process_time(), time.perf_counter()
    for _ in range(steps):
        arm.step()  # type: ignore[operator]
    arm.cpu.append((time.process_time() - c0) / steps)
    arm.wall.append((time.perf_counter() - w0) / steps)


def _spread(xs: list[float]) -> str:
    return f"{statistics.median(xs):.4f} [{min(xs):.4f}–{max(xs):.4f}]"


def table(arms: list[Arm], seq_len: int, tokens: int) -> list[str]:
    """One line per arm: parameters, FLOPs, CPU and wall seconds per step, ratios to the first arm."""
    base = arms[0]
    lines = [
        f"| arm | params | active | FLOPs/token | CPU s/step, median [min–max] | × {base.name} (CPU) "
        f"| wall s/step | FLOPs/CPU-s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for a in arms:
        total = a.model.num_params()
        active = total - moe.inactive_params(a.model)
        flops = a.model.flops_per_token(seq_len)
        cpu = statistics.median(a.cpu)
        ratio = statistics.median(x / b for x, b in zip(a.cpu, base.cpu, strict=True))
        lines.append(
            f"| {a.name} | {total:,} | {active:,} | {flops:,} | {_spread(a.cpu)} | {ratio:.2f} "
            f"| {statistics.median(a.wall):.4f} | {flops * tokens / cpu:.3g} |"
        )
    return lines


def main(argv: Sequence[str]) -> int:
    from gptlab.compose import compose_config, compose_with_hydra

    parser = argparse.ArgumentParser(prog="python -m dev.bench.moe_step", description=__doc__.split("\n")[0])
    parser.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. experiment=ablate_moe")
    parser.add_argument("--arms", default=None, help="comma-separated arms (default: the preset's)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=10, help="timed steps per arm per round")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps before each timed window")
    args = parser.parse_args(argv)
    sweeper = compose_with_hydra(args.overrides).hydra.sweeper
    key = str(sweeper.get("arm") or "")
    names = args.arms.split(",") if args.arms else [str(a) for a in sweeper.get("arms") or []]
    if not key or not names:
        print(
            "error: give a preset with hydra.sweeper.arm and arms (e.g. experiment=ablate_moe)",
            file=sys.stderr,
        )
        return 2
    for name, value, least in (
        ("--rounds", args.rounds, 1),
        ("--steps", args.steps, 1),
        ("--warmup", args.warmup, 0),
    ):
        if value < least:
            print(f"error: {name}={value} is not accepted; give an integer >= {least}", file=sys.stderr)
            return 2
    torch.set_num_threads(1)
    cfgs = {n: compose_config([*args.overrides, f"{key}={n}"]) for n in names}
    arms = [build_arm(n, cfgs[n]) for n in names]
    first = cfgs[names[0]]
    seq_len, batch = first.model.block_size, first.data.batch_size
    load_before = os.getloadavg()
    for r in range(args.rounds):
        for a in arms[r % len(arms) :] + arms[: r % len(arms)]:
            time_round(a, args.warmup, args.steps)
    load_after = os.getloadavg()
    print(f"command: python -m dev.bench.moe_step {' '.join(argv)}")
    print(
        f"setup: cpu, 1 torch thread, batch {batch} × {seq_len} = {batch * seq_len} tokens/step, "
        f"torch {torch.__version__}; {args.warmup} warm-up + {args.steps} timed steps per arm per round, "
        f"{args.rounds} rounds, arms interleaved (order rotated each round)"
    )
    before, after = (" ".join(f"{x:.2f}" for x in load) for load in (load_before, load_after))
    print(f"load average (1, 5, 15 min): before {before}, after {after}")
    print("\n".join(table(arms, seq_len, batch * seq_len)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
