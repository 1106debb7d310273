"""The in-loop task evaluation's cost: the default run with and without callbacks.tasks, interleaved.

usage: python -m dev.bench.tasks_cost [--rounds 2] [--threads 1] [--task val_continuation]
                                 [--set trainer.max_steps=200 ...] [--work DIR] [--json PATH]
Each round trains `python train.py` (its defaults plus --set) twice, in alternating order (the shared
machine's load drifts): with `callbacks.tasks.names=[<task>]` at the configured cadence and with no
task. A run's training time is its steps times the median `throughput/step_time` of the run without
tasks (validation excluded, as the throughput callback measures it); the cost is the wall-time
difference of the two runs over that training time, per round, and the figure is the median; beside
it, the evaluations' own seconds (train.log's "tasks scored at step N in X s") over the tasks run's
training time, which the load's drift between the two runs does not reach. The tasks run must have
scored its task, and both runs must end at the same val loss (the evaluation changes nothing in
training), or the figure means nothing. See docs/performance.md, "Tasks in the loop".
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


def train(work: Path, name: str, tasks: str, threads: int, extra: list[str]) -> dict[str, Any]:
    """One run of train.py: its wall time, metrics.json and median logged step time."""
    out = work / name
    if out.exists():
        subprocess.run(["rm", "-rf", str(out)], check=True)
    cmd = [
        sys.executable, str(REPO / "train.py"), f"hydra.run.dir={out}", f"data.cache_dir={work / 'cache'}",
        "logger=csv", "trainer.enable_progress_bar=false", f"callbacks.tasks.names=[{tasks}]", *extra,
    ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "WANDB_MODE": "disabled"}
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"error: {name} exited {proc.returncode}:\n{proc.stderr[-2000:]}")
    metrics = json.loads((out / "metrics.json").read_text())
    with open(out / "csv" / "metrics.csv") as f:
        steps = [float(r["throughput/step_time"]) for r in csv.DictReader(f) if r.get("throughput/step_time")]
    if not steps:
        raise SystemExit(
            f"error: {name} logged no throughput/step_time; give more steps (--set trainer.max_steps=...)"
        )
    log = (out / "train.log").read_text()
    evals = [float(x) for x in re.findall(r"tasks scored at step \d+ in ([0-9.]+) s", log)]
    return {"wall_s": wall, "metrics": metrics, "step_time_s": statistics.median(steps), "evals_s": evals}


def round_figures(with_tasks: dict[str, Any], without: dict[str, Any]) -> dict[str, Any]:
    """One round's cost, after checking the tasks run scored and trained the same."""
    scored = with_tasks["metrics"].get("tasks") or {}
    if not scored:
        raise SystemExit("error: the run with tasks scored none (a built-in task skipped? see its log)")
    a, b = with_tasks["metrics"]["final_val_loss"], without["metrics"]["final_val_loss"]
    if a != b:
        raise SystemExit(f"error: the runs' final val loss differ ({a} with tasks, {b} without)")
    steps = int(without["metrics"]["steps"])
    train_s = steps * without["step_time_s"]
    extra = with_tasks["wall_s"] - without["wall_s"]
    own_train_s = steps * with_tasks["step_time_s"]
    return {
        "evals_s": with_tasks["evals_s"],
        "own_share": sum(with_tasks["evals_s"]) / own_train_s,  # within the tasks run: no drift
        "wall_with_s": with_tasks["wall_s"],
        "wall_without_s": without["wall_s"],
        "step_time_s": without["step_time_s"],
        "steps": steps,
        "train_s": train_s,
        "cost_share": extra / train_s,
        "tasks": scored,
    }


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--threads", type=int, default=1, help="OMP_NUM_THREADS of each run")
    p.add_argument("--task", default="val_continuation", help="the task of the run with tasks")
    p.add_argument("--work", type=Path, default=REPO / ".cache" / "bench_task_cost")
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--set", action="append", default=[], help="an override for both runs (repeatable)")
    args = p.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    rows = []
    for r in range(args.rounds):
        order = [("tasks", args.task), ("none", "")]
        runs = {}
        for name, task in order if r % 2 == 0 else order[::-1]:
            runs[name] = train(args.work, name, task, args.threads, args.set)
        rows.append(round_figures(runs["tasks"], runs["none"]))
        row = rows[-1]
        print(
            f"round {r + 1}: {row['wall_with_s']:.1f} s with tasks, {row['wall_without_s']:.1f} s "
            f"without; {row['steps']} steps of {row['step_time_s']:.3f} s; cost "
            f"{100 * row['cost_share']:.1f}% of step time; within the tasks run: "
            f"{len(row['evals_s'])} evaluations of {', '.join(f'{x:.1f}' for x in row['evals_s'])} s = "
            f"{100 * row['own_share']:.1f}% of its steps' time",
            flush=True,
        )
    share = statistics.median(r["cost_share"] for r in rows)
    own = statistics.median(r["own_share"] for r in rows)
    print(
        f"median cost within the tasks run (its evaluations' own seconds): {100 * own:.1f}% "
        "of its steps' time"
    )
    print(
        f"median cost of the task evaluation: {100 * share:.1f}% of the training steps' time "
        f"({args.rounds} rounds, {args.threads} thread(s); load average {os.getloadavg()[0]:.1f})"
    )
    if args.json:
        record = {"rounds": rows, "median_cost_share": share, "median_own_share": own}
        args.json.write_text(json.dumps(record, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
