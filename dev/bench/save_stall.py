"""The training thread's stall for one checkpoint save on an improving validation, before and after
one write per save (issue 43 item 2).

Before (gptlab up to 0f4f31a): best.ckpt and last.ckpt each written in full, through the run's
`AtomicCheckpointIO` (torch.save to a temporary name, fsync, rename, fsync of the directory).
After (`OneWriteCheckpoint`): best.ckpt written once, last.ckpt a hard link to it made atomically
(link to a temporary name, rename), the two file-system calls of `link_atomic` without its rank-0
broadcast (one process here). The checkpoint holds what a run's does at this size: the model's
state_dict and AdamW's (two fp32 moments per parameter, made by one step). Rounds alternate the two
ways so a noisy machine slows both alike; the median of each is printed, in seconds.

    python -m dev.bench.save_stall                 # GPT-2 124M: ~1.49 GB a checkpoint
    python -m dev.bench.save_stall --shape tiny    # seconds, for the test
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from gptlab.model import GPT, GPTConfig
from gptlab.training.checkpoint_io import AtomicCheckpointIO

SHAPES = {
    "gpt2": {"n_layer": 12, "n_head": 12, "n_embd": 768, "block_size": 1024, "vocab_size": 50257},
    "tiny": {"n_layer": 1, "n_head": 2, "n_embd": 32, "block_size": 16, "vocab_size": 64},
}


def checkpoint(shape: str) -> dict[str, Any]:
    """The model's and AdamW's state, as a Lightning checkpoint carries them."""
    model = GPT(GPTConfig.from_dict(SHAPES[shape]))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    opt.step()  # AdamW's moments exist from here on
    return {"state_dict": model.state_dict(), "optimizer_states": [opt.state_dict()]}


def two_writes(io: AtomicCheckpointIO, ckpt: dict[str, Any], folder: Path) -> None:
    io.save_checkpoint(ckpt, folder / "best.ckpt")
    io.save_checkpoint(ckpt, folder / "last.ckpt")


def one_write(io: AtomicCheckpointIO, ckpt: dict[str, Any], folder: Path) -> None:
    io.save_checkpoint(ckpt, folder / "best.ckpt")
    tmp = folder / ".last.ckpt.link"
    os.link(folder / "best.ckpt", tmp)
    os.replace(tmp, folder / "last.ckpt")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=sorted(SHAPES), default="gpt2")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dir", default=None, help="where to write (default: a temporary folder)")
    args = parser.parse_args(argv)
    ckpt = checkpoint(args.shape)
    io = AtomicCheckpointIO()
    times: dict[str, list[float]] = {"before: two writes": [], "after: one write + link": []}
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        for _ in range(args.rounds):
            for name, how, sub in (
                ("before: two writes", two_writes, "a"),
                ("after: one write + link", one_write, "b"),
            ):
                folder = Path(tmp) / sub
                folder.mkdir(exist_ok=True)
                for old in folder.iterdir():  # each save starts where a run's first one does
                    old.unlink()
                t0 = time.perf_counter()
                how(io, ckpt, folder)
                times[name].append(time.perf_counter() - t0)
        size = (Path(tmp) / "a" / "best.ckpt").stat().st_size
    medians = {k: statistics.median(v) for k, v in times.items()}
    for name, t in medians.items():
        print(
            f"{name:<26}{t:8.2f} s  (median of {args.rounds}: {', '.join(f'{x:.2f}' for x in times[name])})"
        )
    ratio = medians["after: one write + link"] / medians["before: two writes"]
    print(f"checkpoint {size / 1e9:.3f} GB; after / before {ratio:.2f}")
    result = {"shape": args.shape, "bytes": size, "seconds": times, "median": medians}
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
