"""gptlab against nanoGPT on nanoGPT's shakespeare_char config: CPU seconds of whole runs, interleaved.

usage: python -m dev.bench.nanogpt_pair --nanogpt /tmp/nanogpt [--steps 600] [--rounds 3] [--shape small]
                                        [--text PATH] [--work DIR] [--set k=v ...] [--json PATH]
                                        [--nanogpt-set=--eval_iters=8 ...]
`--nanogpt` is a checkout of karpathy/nanoGPT (gptlab ships none of its code; e.g.
`git clone https://github.com/karpathy/nanoGPT /tmp/nanogpt`). Both train on one local text
(`--text`, default ~1.1 MB of the Python stdlib's sources: no network), prepared for nanoGPT as its
data/shakespeare_char/prepare.py lays a dataset out (character ids, the first 90 % train, uint16
train.bin / val.bin, meta.pkl), for gptlab as `data=text` with the byte tokenizer.

nanoGPT: `train.py config/train_shakespeare_char.py --device=cpu --compile=False --max_iters=N
--lr_decay_iters=N` (its config otherwise: 6 layers, 6 heads, d 384, T 256, batch 64, dropout 0.2,
evaluation every 250 iterations of 200 batches on each split, a checkpoint when val improves).
`--shape small` (the default) overrides the size on both sides (4 layers, 4 heads, d 128, T 64,
batch 16: ~0.1 s a step on one thread; the config's own size is ~10 s a step there: `--shape
shakespeare`). gptlab: `python train.py` with the same model, batch, optimizer and schedule, its
default callbacks and loggers (wandb offline + CSV), `trainer.val_check_interval=250` (nanoGPT's
eval_interval). Validation differs by design: gptlab scores 128 val windows, nanoGPT 200 batches on
train and on val. Each round runs both, in alternating order, one thread each (OMP_NUM_THREADS=1); a run's
CPU seconds are its process tree's user + system time (getrusage of the reaped children), which the
machine's other load changes less than wall time. Prints each run and the medians' ratio
gptlab / nanoGPT. See docs/performance.md, "Short runs".
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from dev.bench.child import REPO
from dev.bench.corpus import local_text
from dev.bench.short_run import SHAPES, shape_overrides

DATASET = "gptlab_pair_chars"


def prepare_nanogpt(text: Path, data_dir: Path) -> int:
    """train.bin, val.bin (uint16 character ids, 90/10 split) and meta.pkl, in nanoGPT's layout;
    returns the vocabulary size."""
    data = text.read_text()
    chars = sorted(set(data))
    index = {c: i for i, c in enumerate(chars)}
    ids = np.array([index[c] for c in data], dtype=np.uint16)
    cut = int(len(ids) * 0.9)
    data_dir.mkdir(parents=True, exist_ok=True)
    ids[:cut].tofile(data_dir / "train.bin")
    ids[cut:].tofile(data_dir / "val.bin")
    meta = {"vocab_size": len(chars), "itos": dict(enumerate(chars)), "stoi": index}
    (data_dir / "meta.pkl").write_bytes(pickle.dumps(meta))
    return len(chars)


def timed(cmd: list[str], cwd: Path, log: Path) -> dict[str, float]:
    """Run `cmd` to completion with one thread: its process tree's CPU seconds and the wall time."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "WANDB_SILENT": "true"}
    env.setdefault("WANDB_MODE", "offline")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    with open(log, "w") as out:
        proc = subprocess.run(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"error: {' '.join(cmd[:3])} ... exited {proc.returncode}; see {log}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"cpu_s": cpu, "wall_s": wall}


def commands(args: argparse.Namespace, work: Path, text: Path) -> dict[str, tuple[list[str], Path]]:
    """Each side's command and working directory."""
    nano = Path(args.nanogpt).resolve()
    nano_cwd = work / "nanogpt_cwd"  # nanoGPT reads configurator.py and data/<dataset> from its cwd
    nano_cwd.mkdir(parents=True, exist_ok=True)
    link = nano_cwd / "configurator.py"
    if not link.exists():
        link.symlink_to(nano / "configurator.py")
    prepare_nanogpt(text, nano_cwd / "data" / DATASET)
    n = args.steps
    nano_cmd = [
        sys.executable, str(nano / "train.py"), str(nano / "config" / "train_shakespeare_char.py"),
        "--device=cpu", "--compile=False", f"--max_iters={n}", f"--lr_decay_iters={n}",
        f"--dataset={DATASET}", f"--out_dir={work / 'nanogpt_out'}",
        *(f"--{k}={v}" for k, v in SHAPES.get(args.shape, {}).items()), *args.nanogpt_set,
    ]  # fmt: skip
    gpt_cmd = [
        sys.executable, str(REPO / "train.py"), *shape_overrides(args.shape), f"data.path={text}",
        f"data.cache_dir={work / 'cache'}", f"hydra.run.dir={work / 'gptlab_run'}", f"trainer.max_steps={n}",
        "trainer.val_check_interval=250", "trainer.accelerator=cpu", "trainer.enable_progress_bar=false",
        *args.set,
    ]  # fmt: skip
    return {"nanogpt": (nano_cmd, nano_cwd), "gptlab": (gpt_cmd, REPO)}


def summary(steps: int, runs: dict[str, list[dict[str, float]]]) -> str:
    """The ratio of the two sides' median CPU seconds, and the median of the rounds' differences
    (gptlab − nanoGPT, each round's two runs side by side): at a few steps, what a gptlab run pays
    beyond nanoGPT's outside the steps; drift between rounds moves it less than the ratio at 600."""
    nano, ours = ([x["cpu_s"] for x in runs[k]] for k in ("nanogpt", "gptlab"))
    med_n, med_g = statistics.median(nano), statistics.median(ours)
    per_round = [g / n for g, n in zip(ours, nano, strict=True)]
    diffs = [g - n for g, n in zip(ours, nano, strict=True)]
    return (
        f"{steps} steps, {len(nano)} rounds, one thread each: nanoGPT {med_n:.1f} CPU s, gptlab "
        f"{med_g:.1f} CPU s (medians); gptlab / nanoGPT = {med_g / med_n:.3f} "
        f"(per round {', '.join(f'{x:.3f}' for x in per_round)})\n"
        f"gptlab − nanoGPT: {statistics.median(diffs):+.2f} CPU s, the median of the rounds' differences "
        f"(per round {', '.join(f'{x:+.2f}' for x in diffs)})"
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--nanogpt", required=True, help="a karpathy/nanoGPT checkout (its train.py, config/)")
    p.add_argument("--steps", type=int, default=600)
    p.add_argument(
        "--shape",
        choices=("small", "shakespeare", "tiny"),
        default="small",
        help="small: 4 layers, d 128, T 64, batch 16 on both sides; shakespeare: the config's own",
    )
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--text", help="the corpus (default: ~1.1 MB of the Python stdlib's sources)")
    p.add_argument("--work", default="/tmp/gptlab_nanogpt_pair")
    p.add_argument("--set", action="append", default=[], help="more gptlab train.py overrides")
    p.add_argument(
        "--nanogpt-set", action="append", default=[], help="more nanoGPT arguments (--eval_iters=8)"
    )
    p.add_argument("--json", help="also write every run's figures here")
    args = p.parse_args(argv)
    if not (Path(args.nanogpt) / "train.py").is_file():
        print(f"error: --nanogpt={args.nanogpt!r} holds no train.py; give a karpathy/nanoGPT checkout")
        return 2
    work = Path(args.work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    text = Path(args.text).resolve() if args.text else local_text(work / "corpus.txt")
    cmds = commands(args, work, text)
    # warm-up (untimed): gptlab's token cache, both sides' page cache
    env_steps = ["--max_iters=1", "--eval_iters=1"]
    timed([*cmds["nanogpt"][0], *env_steps], cmds["nanogpt"][1], work / "warm_nanogpt.log")
    timed([*cmds["gptlab"][0], "trainer.max_steps=1", "logger=none"], REPO, work / "warm_gptlab.log")
    runs: dict[str, list[dict[str, float]]] = {"nanogpt": [], "gptlab": []}
    for r in range(args.rounds):
        order = ("nanogpt", "gptlab") if r % 2 == 0 else ("gptlab", "nanogpt")
        for name in order:
            cmd, cwd = cmds[name]
            shutil.rmtree(work / "gptlab_run", ignore_errors=True)  # each gptlab run starts in a fresh dir
            res = timed(cmd, cwd, work / f"{name}_{r}.log")
            res["load"] = os.getloadavg()[0]
            runs[name].append(res)
            print(f"round {r + 1} {name}: {res['cpu_s']:.1f} CPU s, {res['wall_s']:.1f} wall s, "
                  f"load {res['load']:.1f}", flush=True)  # fmt: skip
    print(summary(args.steps, runs))
    med = {k: statistics.median(x["cpu_s"] for x in v) for k, v in runs.items()}
    if args.json:
        Path(args.json).write_text(json.dumps({"steps": args.steps, "runs": runs, "medians": med}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
