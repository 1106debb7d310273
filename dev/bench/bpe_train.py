"""BPE training benchmark: `tokenizers`' trainer (what data.tokenizer=bpe runs) against rustbpe
(nanochat's trainer), on the same sample of the generated TinyStories-shaped corpus, at the same
vocabulary (256 bytes + <|endoftext|> + merges; rustbpe has no special tokens, so it gets one id less).

Each measurement is a fresh interpreter (`python -m dev.bench.bpe_train --child <json>`): wall and
CPU seconds (both trainers run threads), peak RSS (VmHWM), and the trained BPE's bytes per token on
the 4 MB of the corpus after the sample, encoded by tiktoken with GPT-2's split pattern for both.
Rounds interleave the trainers so load on a shared machine spreads over both.

`--budget-mib 12,50` trains each trainer once per budget on `data.bpe_train_bytes`' sample
(gptlab.data.tokenizers.training_sample) of the same N MiB, to see how much of a corpus BPE training
needs. `--corpus python-sources` trains on real text: the `.py` files of this interpreter's library
and site-packages, in a fixed shuffled order (the generated corpus repeats itself after 32 MiB).
`--corpus long-runs` is the generated corpus with `--runs` documents spread through the sample, each
one character repeated about `--run-chars` times (letters, dashes, spaces: one pre-token each; the
held-out text has none). `--max-piece-chars 256,none` trains at each bound on the pre-token length
(gptlab.data.tokenizers.long_pieces; none: uncut, as the trainers were before issue 37).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from dev.bench.child import run_child
from dev.bench.packing import SEP, generate_corpus
from gptlab.data.tokenizers.long_pieces import MAX_PIECE_CHARS

TRAINERS = ("tokenizers", "rustbpe")
CORPORA = ("generated", "python-sources", "long-runs")
_RUN_CHARACTERS = "a- "  # a letter, a symbol, whitespace: each run is one GPT-2 pre-token
_HELD_OUT = 4 << 20


def python_sources() -> dict[str, Path]:
    """This interpreter's `.py` files (stdlib, then site-packages), keyed by their root's name and
    their path within it: where the interpreter or the venv is installed does not change the keys."""
    import sysconfig

    found: dict[str, Path] = {}
    roots: dict[Path, str] = {}  # purelib and platlib are mostly one folder: read it once
    for kind in ("stdlib", "purelib", "platlib"):
        roots.setdefault(Path(sysconfig.get_path(kind)), kind)
    for root, kind in roots.items():
        if root.is_dir():
            for f in root.rglob("*.py"):
                if f.is_file():
                    found[f"{kind}/{f.relative_to(root).as_posix()}"] = f
    return found


def python_sources_corpus(path: Path, n_bytes: int) -> Path:
    """`n_bytes` of this interpreter's `.py` files (stdlib and site-packages), files in the order of
    a hash of their path within their root (a fixed shuffle: no one package fills the sample; the same
    order in a clone at another path or a venv elsewhere), joined by SEP."""
    if path.is_file() and path.stat().st_size >= n_bytes:
        return path
    files = sorted(python_sources().items(), key=lambda kv: hashlib.sha256(kv[0].encode()).digest())
    written = 0
    with open(path.with_suffix(".tmp"), "wb") as fh:
        for _, f in files:
            text = f.read_bytes()
            if not text.strip():
                continue
            fh.write(text + f"\n{SEP}\n".encode())
            written += len(text) + len(SEP) + 2
            if written >= n_bytes:
                break
    if written < n_bytes:
        raise SystemExit(
            f"--corpus python-sources: only {written >> 20} MiB of .py files here, asked {n_bytes >> 20}"
        )
    path.with_suffix(".tmp").rename(path)
    return path


def long_runs_corpus(path: Path, n_bytes: int, sample: int, runs: int, run_chars: int) -> Path:
    """The generated corpus with `runs` documents of one repeated character inserted at even byte
    offsets of its first `sample` bytes (after a document's end), so the sample holds every run and
    the held-out text after it none. Run i is its character repeated run_chars + i times (distinct
    words for the trainers), between two short words."""
    if path.is_file() and path.stat().st_size >= n_bytes:
        return path
    room = sample - runs * (run_chars + runs + 32)  # base text the sample keeps beside the runs
    if room < sample // 2:
        raise SystemExit(
            f"--corpus long-runs: {runs} runs of {run_chars} characters leave less than half of the "
            f"{sample >> 20} MiB sample to ordinary text; use fewer runs or a larger --sample-mib"
        )
    base = generate_corpus(path.with_name(f"corpus_{n_bytes >> 20}MiB.txt"), n_bytes).read_bytes()
    sep = f"{SEP}\n".encode()
    parts, at = [], 0
    for i in range(runs):
        end = base.index(sep, max(at, (2 * i + 1) * room // (2 * runs))) + len(sep)
        run = f"run {i}: " + _RUN_CHARACTERS[i % len(_RUN_CHARACTERS)] * (run_chars + i) + " end.\n"
        parts += [base[at:end], run.encode(), sep]
        at = end
    with open(path.with_suffix(".tmp"), "wb") as fh:
        fh.write(b"".join(parts) + base[at:])
    path.with_suffix(".tmp").rename(path)
    return path


def _texts(corpus: Path, start: int, n_bytes: int) -> list[str]:
    with open(corpus, "rb") as fh:
        fh.seek(start)
        return fh.read(n_bytes).decode("utf-8", errors="ignore").split(SEP)


def _streamed_texts(corpus: Path, n_bytes: int, chunk: int = 4 << 20) -> Iterator[str]:
    """The documents of the corpus's first n_bytes, read 4 MiB at a time: the trainer's peak RSS
    is then its own table of pieces, not the bench's copy of the text."""
    sep, tail, left = SEP.encode(), b"", n_bytes
    with open(corpus, "rb") as fh:
        while left > 0:
            block = fh.read(min(chunk, left))
            if not block:
                break
            left -= len(block)
            *docs, tail = (tail + block).split(sep)
            yield from (d.decode("utf-8", errors="ignore") for d in docs)
    if tail:
        yield tail.decode("utf-8", errors="ignore")


def _child(spec: dict[str, Any]) -> dict[str, Any]:
    """Train once in this process; time, peak memory and compression of the result."""
    import tiktoken

    from gptlab.data.tokenizers import training_sample
    from gptlab.data.tokenizers.long_pieces import MAX_PIECE_CHARS, bounded_texts
    from gptlab.data.tokenizers.tiktoken_bpe import GPT2_PATTERN, to_tiktoken

    corpus, sample, vocab = Path(spec["corpus"]), spec["sample_bytes"], spec["vocab_size"]
    max_piece = spec.get("max_piece_chars", MAX_PIECE_CHARS)
    counted = [0, 0]  # bytes read, texts read

    def texts() -> Iterator[str]:
        for t in training_sample(_streamed_texts(corpus, sample), spec.get("budget_bytes"), sample):
            counted[0] += len(t.encode())
            counted[1] += 1
            yield t

    t0, c0 = time.perf_counter(), time.process_time()
    if spec["trainer"] == "tokenizers":
        from gptlab.data.tokenizers import BPETokenizer

        enc = to_tiktoken(BPETokenizer.train(texts(), vocab, max_piece).tok)
    else:
        import rustbpe

        tok = rustbpe.Tokenizer()
        tok.train_from_iterator(bounded_texts(texts(), max_piece), vocab - 1, pattern=GPT2_PATTERN)
        ranks = dict(tok.get_mergeable_ranks())
        enc = tiktoken.Encoding("rustbpe", pat_str=GPT2_PATTERN, mergeable_ranks=ranks, special_tokens={})
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    trained_bytes, n_texts = counted  # then, untimed: how many more texts the cuts made
    cuts = sum(1 for _ in bounded_texts(texts(), max_piece)) - n_texts
    held_out = _texts(corpus, sample, _HELD_OUT)
    n_tokens = sum(len(ids) for ids in enc.encode_ordinary_batch(held_out))
    hwm = next(line for line in open("/proc/self/status") if line.startswith("VmHWM:"))
    return {
        "seconds": seconds,
        "cpu_seconds": cpu,
        "rss_mib": int(hwm.split()[1]) / 1024,
        "n_ids": enc.n_vocab,
        "trained_mib": trained_bytes / (1 << 20),
        "cuts": cuts,
        "longest_token": max(len(t) for t in enc._mergeable_ranks),  # bytes
        "bytes_per_token": sum(len(t.encode()) for t in held_out) / max(1, n_tokens),
    }


def measure(
    trainer: str,
    corpus: Path,
    sample_bytes: int,
    vocab_size: int,
    budget_bytes: int | None = None,
    max_piece_chars: int | None = MAX_PIECE_CHARS,
) -> dict[str, Any]:
    """One training in a fresh interpreter."""
    spec = {
        "trainer": trainer,
        "corpus": str(corpus),
        "sample_bytes": sample_bytes,
        "vocab_size": vocab_size,
        "budget_bytes": budget_bytes,
        "max_piece_chars": max_piece_chars,
    }
    return run_child("dev.bench.bpe_train", spec, f"{trainer} training")


def run(
    sample_mib: int,
    vocab_size: int,
    rounds: int,
    work: Path,
    trainers: tuple[str, ...] = TRAINERS,
    budgets_mib: tuple[int | None, ...] = (None,),
    corpus_kind: str = "generated",
    max_pieces: tuple[int | None, ...] = (MAX_PIECE_CHARS,),
    n_runs: int = 6,
    run_chars: int = 100_000,
) -> list[dict[str, Any]]:
    """Every trainer at every budget and pre-token bound `rounds` times, interleaved; median and
    spread of each."""
    work.mkdir(parents=True, exist_ok=True)
    sample = sample_mib << 20
    if corpus_kind == "python-sources":
        corpus = python_sources_corpus(work / f"python_sources_{sample_mib + 4}MiB.txt", sample + _HELD_OUT)
    elif corpus_kind == "long-runs":
        name = f"long_runs_{sample_mib + 4}MiB_{n_runs}x{run_chars}.txt"
        corpus = long_runs_corpus(work / name, sample + _HELD_OUT, sample, n_runs, run_chars)
    else:
        corpus = generate_corpus(work / f"corpus_{sample_mib + 4}MiB.txt", sample + _HELD_OUT)
    cells = [(t, b, m) for m in max_pieces for b in budgets_mib for t in trainers]
    samples: dict[tuple[str, int | None, int | None], list[dict[str, Any]]] = {c: [] for c in cells}
    for r in range(rounds):
        for t, b, m in cells:
            load = os.getloadavg()[0]
            res = measure(t, corpus, sample, vocab_size, None if b is None else b << 20, m)
            res["load"] = load
            samples[(t, b, m)].append(res)
            print(
                f"round {r + 1}: {_label(t, m)} {res['trained_mib']:.0f} of {sample_mib} MiB, "
                f"{res['cuts']} cuts -> {res['n_ids']} ids (longest {res['longest_token']} bytes): "
                f"{res['seconds']:.1f} s "
                f"({res['cpu_seconds']:.1f} CPU-s), RSS {res['rss_mib']:.0f} MiB, "
                f"{res['bytes_per_token']:.3f} bytes/token, load average {load:.2f}",
                flush=True,
            )
    return [
        {
            "trainer": t,
            "max_piece_chars": m,
            "cuts": runs[0]["cuts"],
            "longest_token": runs[0]["longest_token"],
            "corpus": corpus_kind,
            "sample_mib": sample_mib,
            "budget_mib": b,
            "trained_mib": runs[0]["trained_mib"],
            "n_ids": runs[0]["n_ids"],
            "seconds_median": statistics.median(s["seconds"] for s in runs),
            "seconds_min": min(s["seconds"] for s in runs),
            "seconds_max": max(s["seconds"] for s in runs),
            "cpu_seconds_median": statistics.median(s["cpu_seconds"] for s in runs),
            "rss_mib_max": max(s["rss_mib"] for s in runs),
            "bytes_per_token": runs[0]["bytes_per_token"],
            "load_min": min(s["load"] for s in runs),
            "load_max": max(s["load"] for s in runs),
            "rounds": len(runs),
        }
        for (t, b, m), runs in samples.items()
    ]


def _label(trainer: str, max_piece_chars: int | None) -> str:
    """The trainer's name, and its pre-token bound when it is not the default."""
    if max_piece_chars == MAX_PIECE_CHARS:
        return trainer
    return f"{trainer}, uncut" if max_piece_chars is None else f"{trainer}, pieces <= {max_piece_chars}"


def format_table(rows: list[dict[str, Any]]) -> str:
    """The markdown table docs/performance.md shows."""
    lines = [
        "| trainer | sample | ids | seconds median (min–max) | CPU-seconds | MB/s | peak RSS "
        "| held-out bytes/token | load average |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        mb_s = r["trained_mib"] * 1.048576 / r["seconds_median"]
        sample = f"{r['sample_mib']} MiB"
        if r.get("budget_mib") is not None and r["trained_mib"] < r["sample_mib"] - 0.5:
            sample = f"{r['trained_mib']:.0f} MiB spread over {r['sample_mib']} MiB"
        label = _label(r["trainer"], r.get("max_piece_chars", MAX_PIECE_CHARS))
        lines.append(
            f"| {label} | {sample} | {r['n_ids']} | {r['seconds_median']:.1f} "
            f"({r['seconds_min']:.1f}–{r['seconds_max']:.1f}) | {r['cpu_seconds_median']:.1f} | {mb_s:.1f} "
            f"| {r['rss_mib_max']:.0f} MiB | {r['bytes_per_token']:.3f} "
            f"| {r['load_min']:.1f}–{r['load_max']:.1f} |"
        )
    return "\n".join(lines)


def parse(argv: list[str]) -> argparse.Namespace:
    """Command-line options of dev/bench/bpe_train.py."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sample-mib", type=int, default=100, help="training sample (MiB)")
    p.add_argument("--vocab-size", type=int, default=4096)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--trainers", default=",".join(TRAINERS))
    p.add_argument(
        "--budget-mib",
        default="",
        help="comma-separated data.bpe_train_bytes budgets (MiB) to train at; 'all' = the whole sample",
    )
    p.add_argument("--corpus", choices=CORPORA, default="generated")
    p.add_argument(
        "--max-piece-chars",
        default=str(MAX_PIECE_CHARS),
        help="comma-separated bounds on a training pre-token's length to train at; 'none' = uncut",
    )
    p.add_argument("--runs", type=int, default=6, help="--corpus long-runs: run documents in the sample")
    p.add_argument("--run-chars", type=int, default=100_000, help="--corpus long-runs: a run's length")
    p.add_argument("--work", default=str(Path(tempfile.gettempdir()) / "gptlab-bench-bpe-train"))
    p.add_argument("--json", default=None, help="also write the rows as JSON here")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv: list[str]) -> int:
    """Run the benchmark (or, with --child, one training) and print the table."""
    args = parse(argv)
    if args.child:
        print(json.dumps(_child(json.loads(args.child))))
        return 0
    budgets = tuple(
        None if b.strip() == "all" else int(b) for b in args.budget_mib.split(",") if b.strip()
    ) or (None,)
    rows = run(
        args.sample_mib,
        args.vocab_size,
        args.rounds,
        Path(args.work),
        tuple(args.trainers.split(",")),
        budgets,
        args.corpus,
        tuple(None if m.strip() == "none" else int(m) for m in args.max_piece_chars.split(",") if m.strip()),
        args.runs,
        args.run_chars,
    )
    print(format_table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
