"""Task-scoring benchmark: items per second of evaluate.py's multiple-choice scoring on the CPU.

The task is synthetic, 4 choices with HellaSwag-like lengths (assumed shapes: HellaSwag itself needs
the hub): a context of CONTEXT_WORDS words and endings of ENDING_WORDS words, ~4.6 bytes a word with
its space, so ~220-byte contexts and ~110-byte endings. A byte-level model (the default preset) sees
those bytes (a request is then longer than its block_size of 256 and loses context from the left, as
a real HellaSwag item would); a model whose vocabulary is larger than 256 ids (`gpt2`) reads one
token per word, a stand-in for GPT-2's BPE at ~4.6 bytes a token (~48 + 24 tokens a request).
Weights are randomly initialised: the arithmetic is that of a trained model. One torch thread; each
(preset, batch size) is measured once per round and rounds interleave them, so load on the shared
machine spreads over all; the median and range over rounds are reported with the load average.
The FLOPs of scoring one item (torch's FlopCounterMode) times items per CPU-second say how close
scoring runs to the machine's matmul rate; the CPU seconds spent beside the model's forwards (encoding,
packing, reading the scores: the scorer's own overhead) are printed under the table, per row.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.flop_counter import FlopCounterMode

from gptlab.compose import compose_config
from gptlab.data.tokenizers import ByteTokenizer
from gptlab.evaluation import Item, choice_loglikelihoods, summarize
from gptlab.model import GPT

CONTEXT_WORDS = 48
ENDING_WORDS = 24
CHOICES = 4
CPU = torch.device("cpu")


class ForwardClock:
    """CPU seconds inside a module's forwards (a pre- and a post-hook)."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.cpu = 0.0
        self._start = 0.0
        model.register_forward_pre_hook(self._enter)
        model.register_forward_hook(self._leave)

    def _enter(self, *_: Any) -> None:
        self._start = time.process_time()

    def _leave(self, *_: Any) -> None:
        self.cpu += time.process_time() - self._start


class WordIds:
    """One token per space-separated word (its index in `words`): GPT-2-sized tokens without a
    trained BPE."""

    name = "words"

    def __init__(self, words: list[str]) -> None:
        self.ids = {w: i for i, w in enumerate(words)}

    def encode(self, text: str) -> list[int]:
        return [self.ids[w] for w in text.split()]


def vocabulary(n: int, seed: int = 0) -> list[str]:
    """n distinct lowercase words of 2-5 letters (3.6 on average)."""
    rng = np.random.default_rng(seed)
    letters = np.array(list("etaoinshrdlucmfwypvbgk"))
    words: dict[str, None] = {}
    while len(words) < n:
        words["".join(rng.choice(letters, int(rng.integers(2, 6))))] = None
    return list(words)


def synthetic_items(n_items: int, words: list[str], seed: int = 0) -> list[Item]:
    """n items: a CONTEXT_WORDS-word context, CHOICES endings of ENDING_WORDS words after a space."""
    rng = np.random.default_rng(seed)

    def text(k: int) -> str:
        return " ".join(words[i] for i in rng.integers(0, len(words), k))

    items = []
    for _ in range(n_items):
        context, endings = text(CONTEXT_WORDS), tuple(text(ENDING_WORDS) for _ in range(CHOICES))
        items.append(Item(context, endings, int(rng.integers(CHOICES)), " "))
    return items


def setup(preset: str, overrides: list[str], n_items: int) -> dict[str, Any]:
    """The preset's model, randomly initialised, its tokenizer and the task's items."""
    cfg = compose_config([f"model={preset}", *overrides]).model
    torch.manual_seed(0)
    model = GPT(cfg).eval()
    if cfg.vocab_size > 256:
        words = vocabulary(min(cfg.vocab_size, 20_000))
        tokenizer: Any = WordIds(words)
    else:
        words, tokenizer = vocabulary(2_000), ByteTokenizer()
    items = synthetic_items(n_items, words)
    with FlopCounterMode(display=False) as flops:  # one item scored: its forward passes' FLOPs
        choice_loglikelihoods(model, tokenizer, items[:1], CHOICES, CPU)
    return {
        "gflop_item": flops.get_total_flops() / 1e9,
        "model": model,
        "clock": ForwardClock(model),
        "tokenizer": tokenizer,
        "items": items,
        "params_m": sum(p.numel() for p in model.parameters()) / 1e6,
        "block_size": cfg.block_size,
    }


def measure(case: dict[str, Any], batch_size: int) -> dict[str, Any]:
    """Score every item once; wall and CPU seconds, and how many contexts were cut."""
    clock = case["clock"]
    clock.cpu = 0.0
    t0, c0 = time.perf_counter(), time.process_time()
    result = choice_loglikelihoods(case["model"], case["tokenizer"], case["items"], batch_size, CPU)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    n = len(case["items"])
    tokens = sum(
        len(case["tokenizer"].encode(it.context + it.delimiter + it.choices[0])) for it in case["items"]
    )
    return {
        "items_s": n / seconds,
        "items_cpu_s": n / cpu,
        "beside_forwards": (cpu - clock.cpu) / cpu,
        "cut": summarize(result)["cut"],
        "request_tokens": min(tokens / n, case["block_size"] + 1),
    }


def run(
    presets: list[str], batch_sizes: list[int], n_items: int, rounds: int, overrides: list[str] = ()
) -> list[dict[str, Any]]:
    """Every (preset, batch size) `rounds` times, interleaved; one row each with the median and range."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        cases = {p: setup(p, list(overrides), n_items) for p in presets}
        for case in cases.values():  # first-call costs (allocator, kernels) out of the rounds
            measure({**case, "items": case["items"][:1]}, 1)
        samples: dict[tuple[str, int], list[dict[str, Any]]] = {
            (p, b): [] for p in presets for b in batch_sizes
        }
        for r in range(rounds):
            for (preset, batch), runs in samples.items():
                load = os.getloadavg()[0]
                res = measure(cases[preset], batch) | {"load": load}
                runs.append(res)
                print(
                    f"round {r + 1}: {preset} batch {batch}: {res['items_s']:.2f} items/s "
                    f"({res['items_cpu_s']:.2f} per CPU-s), load average {load:.2f}",
                    flush=True,
                )
    finally:
        torch.set_num_threads(threads)
    rows = []
    for (preset, batch), runs in samples.items():
        speeds = [s["items_s"] for s in runs]
        rows.append(
            {
                "preset": preset,
                "params_m": cases[preset]["params_m"],
                "block_size": cases[preset]["block_size"],
                "request_tokens": runs[0]["request_tokens"],
                "batch_size": batch,
                "items": n_items,
                "items_s_median": statistics.median(speeds),
                "items_s_min": min(speeds),
                "items_s_max": max(speeds),
                "items_cpu_s_median": statistics.median(s["items_cpu_s"] for s in runs),
                "gflop_cpu_s": cases[preset]["gflop_item"]
                * statistics.median(s["items_cpu_s"] for s in runs),
                "beside_forwards_median": statistics.median(s["beside_forwards"] for s in runs),
                "cut": runs[0]["cut"],
                "rounds": len(runs),
                "load_min": min(s["load"] for s in runs),
                "load_max": max(s["load"] for s in runs),
            }
        )
    return rows


def format_table(rows: list[dict[str, Any]]) -> str:
    """The markdown table docs/performance.md shows."""
    lines = [
        "| model | parameters | tokens a request | batch (requests) | items/s median (min–max) "
        "| items per CPU-second | GFLOP per CPU-second | contexts cut | load average |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['preset']} | {r['params_m']:.1f} M | {r['request_tokens']:.0f} | {r['batch_size']} "
            f"| {r['items_s_median']:.2f} ({r['items_s_min']:.2f}–{r['items_s_max']:.2f}) "
            f"| {r['items_cpu_s_median']:.2f} | {r['gflop_cpu_s']:.0f} | {r['cut']} of {r['items']} "
            f"| {r['load_min']:.1f}–{r['load_max']:.1f} |"
        )
    return "\n".join(lines)


def parse(argv: list[str]) -> argparse.Namespace:
    """Command-line options of dev/bench/tasks.py."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--presets", default="pre_rmsnorm_swiglu,gpt2", help="conf/model presets, comma-separated")
    p.add_argument("--batch-sizes", default="1,8,32", help="requests per forward, comma-separated")
    p.add_argument("--items", type=int, default=16, help="items scored per measurement")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--json", default=None, help="also write the rows as JSON here")
    p.add_argument("overrides", nargs="*", help="model overrides for every preset, e.g. model.n_layer=2")
    return p.parse_args(argv)


def main(argv: list[str]) -> int:
    """Run the benchmark and print the table."""
    args = parse(argv)
    rows = run(
        args.presets.split(","),
        [int(b) for b in args.batch_sizes.split(",")],
        args.items,
        args.rounds,
        args.overrides,
    )
    print(format_table(rows))
    for r in rows:
        print(
            f"{r['preset']} batch {r['batch_size']}: {100 * r['beside_forwards_median']:.1f} % of the "
            "scoring CPU beside the model's forwards (median)"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
