"""Sweep benchmark: one ablation grid serially and with N slots side by side, interleaved rounds.

usage: python -m dev.bench.sweep [--experiment ablate_tying_quick] [--slots 2] [--rounds 2]
                                 [--set trainer.max_steps=200 ...] [--work DIR] [--json PATH]
Serial is what a user gets without the launcher's slots: one job after another, torch's default
threads (every core). Side by side is `hydra.launcher.slots=N hydra.launcher.threads=1`. Each round
runs both, in alternating order (the shared machine's load drifts); the figure is the median of the
per-round ratios. The final losses must agree job for job, or the speed-up means nothing: the
benchmark says which jobs differ. See docs/performance.md, "Sweeps side by side".
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _sweep(work: Path, name: str, experiment: str, extra: list[str]) -> tuple[float, dict[str, float]]:
    out = work / name
    if out.exists():
        subprocess.run(["rm", "-rf", str(out)], check=True)
    cmd = [
        sys.executable, str(REPO / "train.py"), "-m", f"experiment={experiment}", f"hydra.sweep.dir={out}",
        f"data.cache_dir={work / 'cache'}", *extra,
    ]  # fmt: skip
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true"}
    env.pop("OMP_NUM_THREADS", None)
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"error: {name} exited {proc.returncode}:\n{proc.stderr[-2000:]}")
    losses = {
        d.name: json.loads((d / "metrics.json").read_text())["final_val_loss"]
        for d in out.iterdir()
        if d.name.isdigit()
    }
    return wall, losses


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--experiment", default="ablate_tying_quick")
    p.add_argument("--slots", type=int, default=2)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--work", type=Path, default=REPO / ".cache" / "bench_sweep")
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--set", action="append", default=[], help="an override for every job (repeatable)")
    p.add_argument(
        "--no-warmup", action="store_true", help="skip the untimed run that builds the token cache"
    )
    args = p.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    side = [f"hydra.launcher.slots={args.slots}", "hydra.launcher.threads=1", *args.set]
    serial = list(args.set)
    if not args.no_warmup:  # the token cache, built once before anything is timed
        _sweep(args.work, "warmup", args.experiment, ["hydra.sweeper.seeds=1", "trainer.max_steps=2"])
    rows = []
    for r in range(args.rounds):
        order = [("serial", serial), ("slots", side)]
        if r % 2:
            order.reverse()
        got = {name: _sweep(args.work, f"{name}_{r}", args.experiment, extra) for name, extra in order}
        (ts, ls), (tp, lp) = got["serial"], got["slots"]
        differ = sorted(k for k in ls if ls[k] != lp.get(k))
        rows.append(
            {"round": r, "serial_s": ts, "slots_s": tp, "ratio": tp / ts, "jobs": len(ls), "differ": differ}
        )
        print(
            f"round {r}: serial {ts:6.1f} s, {args.slots} slots {tp:6.1f} s, ratio {tp / ts:.2f}, "
            f"{len(ls)} jobs, final losses {'identical' if not differ else 'DIFFER at ' + ','.join(differ)}",
            flush=True,
        )
    ratio = statistics.median(row["ratio"] for row in rows)
    print(f"median ratio (slots / serial) over {args.rounds} rounds: {ratio:.2f}")
    if args.json:
        record = {"experiment": args.experiment, "slots": args.slots, "set": args.set, "rounds": rows}
        args.json.write_text(json.dumps(record))
    return 0 if all(not row["differ"] for row in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
