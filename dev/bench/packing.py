"""Packing benchmark: MB/s and peak RSS of the streaming packer on a generated multi-GB corpus.

The BPE rows run once per encoder (`--encoders tiktoken,tokenizers`: data.bpe_encoder forced to each),
side by side in the same rounds, and check that both packed the same bytes (meta.json's checksums).

Each measurement is a fresh interpreter (`python -m dev.bench.packing --child <json>`) that packs
the corpus with `prepare_tokens` into an empty cache, so imports, the pool's start, writing and the
checksums are all in the time; the corpus is read from the page cache after the first round. Peak RSS
is VmHWM from /proc (not getrusage, whose maxrss survives exec and so reports the parent's size); the
pool's workers are reported apart (the largest one, from RUSAGE_CHILDREN). Rounds interleave every
configuration so load on a shared machine spreads over all of them.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dev.bench.child import run_child

SEP = "<|endoftext|>"
_UNIQUE = 32 << 20  # distinct text generated; larger corpora repeat it (documents stay distinct in order)


def generate_corpus(path: Path, n_bytes: int, seed: int = 0) -> Path:
    """TinyStories-shaped text: ~800-byte documents of Zipf-distributed words, separated by SEP."""
    if path.is_file() and path.stat().st_size >= n_bytes:
        return path
    rng = np.random.default_rng(seed)
    letters = np.array(list("etaoinshrdlucmfwypvbgk"))
    words = ["".join(rng.choice(letters, rng.integers(1, 9))) for _ in range(5000)]
    ranks = np.minimum(rng.zipf(1.2, 1 << 22), 5000) - 1
    text = []
    total = i = 0
    while total < min(n_bytes, _UNIQUE):
        n = int(rng.integers(80, 200))
        doc = " ".join(words[r] for r in ranks[i : i + n]) + ".\n"
        i = (i + n) % (len(ranks) - 200)
        text.append(doc + SEP + "\n")
        total += len(doc) + len(SEP) + 1
    block = "".join(text).encode()
    with open(path, "wb") as fh:
        written = 0
        while written < n_bytes:
            part = block[: n_bytes - written]
            fh.write(part)
            written += len(part)
    return path


def train_bpe(corpus: Path, out: Path, vocab_size: int = 4096) -> Path:
    """A byte-level BPE trained on the corpus's first 8 MB (packing then loads it as pretrained)."""
    from gptlab.data.tokenizers import BPETokenizer

    if not (out / "tokenizer.json").is_file():
        with open(corpus, "rb") as fh:
            texts = fh.read(8 << 20).decode("utf-8", errors="ignore").split(SEP)
        BPETokenizer.train(texts, vocab_size).save(out)
    return out


def _child(spec: dict[str, Any]) -> dict[str, Any]:
    """Pack once in this process; time and peak memory."""
    from gptlab.data import packing
    from gptlab.data.config import DataConfig
    from gptlab.data.packing import prepare_tokens

    if spec.pop("force_pool", False):  # measure the pool the packer does not choose (STREAM_POOL)
        packing.PARALLEL_MIN_BYTES = 0
        packing.STREAM_POOL = True
    said: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: said.append(record.getMessage())  # type: ignore[method-assign]
    logging.getLogger("gptlab.data.tokenizers.tiktoken_bpe").addHandler(handler)
    logging.getLogger("gptlab.data.tokenizers.tiktoken_bpe").setLevel(logging.INFO)
    t0, c0 = time.perf_counter(), time.process_time()
    packed = prepare_tokens(DataConfig(**spec))
    seconds = time.perf_counter() - t0
    workers = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = time.process_time() - c0 + workers.ru_utime + workers.ru_stime
    hwm = next(line for line in open("/proc/self/status") if line.startswith("VmHWM:"))
    return {
        "seconds": seconds,
        "cpu_seconds": cpu,
        "rss_mib": int(hwm.split()[1]) / 1024,
        "worker_rss_mib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
        "tokens": sum(packed.meta["n_tokens"].values()),
        "files": packed.meta["files"],
        "encoder_said": said,
    }


@dataclass(frozen=True)
class Case:
    """One configuration: tokenizer, processes, corpus size, and for BPE the encoder."""

    tokenizer: str
    procs: int
    n_bytes: int
    encoder: str = ""  # bpe: tiktoken | tokenizers (data.bpe_encoder)

    @property
    def label(self) -> str:
        """The tokenizer column: 'byte', 'bpe (tiktoken)', ..."""
        return f"{self.tokenizer} ({self.encoder})" if self.encoder else self.tokenizer


def measure(case: Case, corpus: Path, bpe_dir: Path, work: Path) -> dict[str, Any]:
    """One packing of `corpus` in a fresh interpreter, its cache removed afterwards."""
    cache = Path(tempfile.mkdtemp(dir=work, prefix="cache."))
    spec: dict[str, Any] = {
        "source": "text",
        "path": str(corpus),
        "doc_separator": SEP,
        "num_proc": case.procs,
        "cache_dir": str(cache),
        "force_pool": case.procs > 1,
    }
    if case.tokenizer == "bpe":
        spec.update(tokenizer="pretrained", tokenizer_path=str(bpe_dir), bpe_encoder=case.encoder)
    try:
        result = run_child("dev.bench.packing", spec, "packing child")
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    if case.encoder and not any(
        line.startswith(f"encoding with {case.encoder}") for line in result["encoder_said"]
    ):
        raise RuntimeError(f"{case.label}: the packer did not say it encoded with {case.encoder}: {result}")
    result["mb_s"] = case.n_bytes / 1e6 / result["seconds"]
    result["mb_cpu_s"] = case.n_bytes / 1e6 / result["cpu_seconds"]
    return result


def run(
    sizes: list[int],
    tokenizers: list[str],
    procs: list[int],
    rounds: int,
    work: Path,
    encoders: tuple[str, ...] = ("tiktoken", "tokenizers"),
) -> list[dict[str, Any]]:
    """Every case `rounds` times, interleaved; the median and spread of each. Raises if two BPE
    encoders packed different bytes."""
    work.mkdir(parents=True, exist_ok=True)
    corpora = {n: generate_corpus(work / f"corpus_{n >> 20}MiB.txt", n) for n in sizes}
    bpe_dir = train_bpe(corpora[min(sizes)], work / "bpe4096") if "bpe" in tokenizers else work
    cases = [
        Case(t, p, n, e)
        for t in tokenizers
        for p in procs
        for n in sizes
        for e in (encoders if t == "bpe" else ("",))
    ]
    samples: dict[Case, list[dict[str, Any]]] = {c: [] for c in cases}
    for r in range(rounds):
        for c in cases:
            load = os.getloadavg()[0]
            res = measure(c, corpora[c.n_bytes], bpe_dir, work)
            res["load"] = load
            samples[c].append(res)
            print(
                f"round {r + 1}: {c.label} procs={c.procs} {c.n_bytes >> 20} MiB: "
                f"{res['mb_s']:.1f} MB/s ({res['mb_cpu_s']:.1f} per CPU-s), RSS {res['rss_mib']:.0f} MiB, "
                f"load average {load:.2f}",
                flush=True,
            )
    for c in cases:  # the encoders must have packed the same bytes
        for other in cases:
            if c.encoder and other.encoder and (c.procs, c.n_bytes) == (other.procs, other.n_bytes):
                if samples[c][0]["files"] != samples[other][0]["files"]:
                    raise RuntimeError(f"{c.label} and {other.label} packed different bytes")
    rows = []
    for c, runs in samples.items():
        speeds = [s["mb_s"] for s in runs]
        rows.append(
            {
                "tokenizer": c.label,
                "procs": c.procs,
                "corpus_mib": c.n_bytes >> 20,
                "mb_s_median": statistics.median(speeds),
                "mb_s_min": min(speeds),
                "mb_s_max": max(speeds),
                "mb_cpu_s_median": statistics.median(s["mb_cpu_s"] for s in runs),
                "rss_mib_max": max(s["rss_mib"] for s in runs),
                "worker_rss_mib_max": max(s["worker_rss_mib"] for s in runs),
                "rounds": len(runs),
                "load_min": min(s["load"] for s in runs),
                "load_max": max(s["load"] for s in runs),
            }
        )
    return rows


def format_table(rows: list[dict[str, Any]]) -> str:
    """The markdown table docs/performance.md shows."""
    lines = [
        "| tokenizer | processes | corpus | MB/s median (min–max) | MB per CPU-second | peak RSS main "
        "| peak RSS per worker | load average |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        worker = f"{r['worker_rss_mib_max']:.0f} MiB" if r["procs"] > 1 else "–"
        lines.append(
            f"| {r['tokenizer']} | {r['procs']} | {r['corpus_mib']} MiB | {r['mb_s_median']:.1f} "
            f"({r['mb_s_min']:.1f}–{r['mb_s_max']:.1f}) | {r['mb_cpu_s_median']:.1f} "
            f"| {r['rss_mib_max']:.0f} MiB | {worker} | {r['load_min']:.1f}–{r['load_max']:.1f} |"
        )
    return "\n".join(lines)


def parse(argv: list[str]) -> argparse.Namespace:
    """Command-line options of dev/bench/packing.py."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes-mib", default="2048,512", help="corpus sizes, comma-separated (MiB)")
    p.add_argument("--tokenizers", default="byte,bpe")
    p.add_argument("--procs", default="1,2")
    p.add_argument("--encoders", default="tiktoken,tokenizers", help="the BPE rows' data.bpe_encoder values")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--work", default=str(Path(tempfile.gettempdir()) / "gptlab-bench-packing"))
    p.add_argument("--json", default=None, help="also write the rows as JSON here")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv: list[str]) -> int:
    """Run the benchmark (or, with --child, one packing) and print the table."""
    args = parse(argv)
    if args.child:
        print(json.dumps(_child(json.loads(args.child))))
        return 0
    rows = run(
        [int(s) << 20 for s in args.sizes_mib.split(",")],
        args.tokenizers.split(","),
        [int(p) for p in args.procs.split(",")],
        args.rounds,
        Path(args.work),
        tuple(args.encoders.split(",")),
    )
    print(format_table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
