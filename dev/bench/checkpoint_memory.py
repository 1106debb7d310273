"""What model.activation_checkpointing saves and costs, measured on real tensors
(dev/bench/checkpoint_memory.py).

One training step of the model as composed (forward, next-token cross-entropy, backward, AdamW step)
on a random batch of data.batch_size windows, per mode, under torch's `MemTracker`: it attributes
every live tensor storage to parameters, gradients, optimizer state, activations (what the forward
keeps for backward, and what recomputation rebuilds) or temporaries, and keeps each kind's peak. A
first, untracked step creates AdamW's state, so the tracked step is a steady-state one. Real
arithmetic on the CPU: it measures the shapes it is given, so use CPU-sized models.

With `--rounds N` it also times the step of each mode (N interleaved rounds, so a noisy machine
slows every mode alike; the median per mode) and prints the ratio to `none` beside the planner's
recompute factor (planning.plan.recompute_factor: 1 + the checkpointed share of blocks / 3).
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
from typing import Any

import torch
import torch.nn.functional as F

from gptlab.model import GPT, GPTConfig
from gptlab.model.config import ACTIVATION_CHECKPOINTING


def _step(model: GPT, opt: torch.optim.Optimizer, batch: torch.Tensor) -> None:
    logits = model(batch[:, :-1])
    F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), batch[:, 1:].reshape(-1)).backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


def _steady(cfg: GPTConfig, batch_size: int, seed: int) -> tuple[GPT, torch.optim.Optimizer, torch.Tensor]:
    """A model, AdamW and a random batch after one untracked step, which creates AdamW's state:
    every step measured after it is a steady-state one."""
    torch.manual_seed(seed)
    model = GPT(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    batch = torch.randint(0, cfg.vocab_size, (batch_size, cfg.block_size + 1))
    _step(model, opt, batch)
    return model, opt, batch


def step_peaks(cfg: GPTConfig, batch_size: int, seed: int = 0) -> dict[str, int]:
    """Peak bytes of one steady-state training step on the CPU: `activations`, `temporaries`,
    `parameters`, `gradients`, `optimizer` (each kind's own peak) and `total` (the step's peak)."""
    from torch.distributed._tools.mem_tracker import MemTracker

    model, opt, batch = _steady(cfg, batch_size, seed)
    tracker = MemTracker()
    tracker.track_external(model, opt)
    with tracker:
        _step(model, opt, batch)
    (per_device,) = tracker.get_tracker_snapshot("peak").values()
    names = {"ACT": "activations", "TEMP": "temporaries", "PARAM": "parameters", "GRAD": "gradients"}
    names["OPT"] = "optimizer"
    peaks = {names[k.name]: int(v) for k, v in per_device.items() if getattr(k, "name", None) in names}
    return {**peaks, "total": int(per_device["Total"])}


def compare(cfg: GPTConfig, batch_size: int) -> dict[str, dict[str, int]]:
    """step_peaks for each model.activation_checkpointing mode, the rest of `cfg` unchanged."""
    return {
        mode: step_peaks(dataclasses.replace(cfg, activation_checkpointing=mode), batch_size)
        for mode in ACTIVATION_CHECKPOINTING
    }


def step_seconds(cfg: GPTConfig, batch_size: int, rounds: int, seed: int = 0) -> dict[str, list[float]]:
    """Wall seconds of one steady-state training step per mode, `rounds` rounds interleaved over
    the modes (each mode's model, optimizer and batch built once, with the same seed)."""
    setups = {
        mode: _steady(dataclasses.replace(cfg, activation_checkpointing=mode), batch_size, seed)
        for mode in ACTIVATION_CHECKPOINTING
    }
    times: dict[str, list[float]] = {mode: [] for mode in setups}
    for _ in range(rounds):
        for mode, (model, opt, batch) in setups.items():
            t0 = time.perf_counter()
            _step(model, opt, batch)
            times[mode].append(time.perf_counter() - t0)
    return times


def format_times(cfg: GPTConfig, times: dict[str, list[float]]) -> str:
    from gptlab.planning.plan import recompute_factor

    base = statistics.median(times["none"])
    lines = [
        f"step time, median of {len(times['none'])} interleaved rounds (1 thread)",
        "| activation_checkpointing | step (ms) | vs none | planner's recompute factor |",
        "|---|---:|---:|---:|",
    ]
    for mode, ts in times.items():
        med = statistics.median(ts)
        factor = recompute_factor(dataclasses.replace(cfg, activation_checkpointing=mode))
        lines.append(f"| {mode} | {med * 1e3:.1f} | {med / base:.2f} | {factor:.2f} |")
    return "\n".join(lines)


def format_table(cfg: GPTConfig, batch_size: int, peaks: dict[str, dict[str, Any]]) -> str:
    mib = 2**20
    lines = [
        f"model: {cfg.n_layer} layers, d={cfg.n_embd}, T={cfg.block_size}, batch {batch_size}, "
        f"selective = every {cfg.activation_checkpointing_every} blocks; peak MiB of one step (MemTracker)",
        "| activation_checkpointing | activations | temporaries | step total | activations vs none |",
        "|---|---:|---:|---:|---:|",
    ]
    base = peaks["none"]["activations"]
    for mode, p in peaks.items():
        lines.append(
            f"| {mode} | {p['activations'] / mib:.1f} | {p['temporaries'] / mib:.1f} | "
            f"{p['total'] / mib:.1f} | {p['activations'] / base:.2f} |"
        )
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    """dev/bench/checkpoint_memory.py: the overrides compose the config as train.py does."""
    from gptlab.compose import compose_config
    from gptlab.errors import USER_ERRORS, exit_with

    parser = argparse.ArgumentParser(prog="dev/bench/checkpoint_memory.py", add_help=False)
    parser.add_argument("--rounds", type=int, default=0)
    opts, overrides = parser.parse_known_args(argv)
    torch.set_num_threads(1)
    try:
        if opts.rounds < 0:
            raise ValueError(f"--rounds={opts.rounds} is not accepted; give 0 (no timing) or more rounds")
        cfg = compose_config(overrides)
        model_cfg = GPTConfig.from_dict(dataclasses.asdict(cfg.model))
    except USER_ERRORS as err:
        exit_with(err)
    batch_size = cfg.data.batch_size
    print("command: python -m dev.bench.checkpoint_memory " + " ".join(argv))
    print(format_table(model_cfg, batch_size, compare(model_cfg, batch_size)))
    if opts.rounds:
        print()
        print(format_times(model_cfg, step_seconds(model_cfg, batch_size, opts.rounds)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
