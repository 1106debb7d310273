"""How evenly a sweep's MoE jobs routed: max/mean expert load from the jobs' telemetry, per arm and LR.

Why: a balancing method is judged by its loss and by the balance it buys (Wang et al. 2024 compare
the auxiliary loss with the loss-free bias on both); report.md has the loss, this has the balance.
Telemetry logs `moe/block_XX/max_over_mean_load` (1 = every expert got the same tokens, E/k = all
on top_k experts) on its steps; here, per job, the value at the last logged step averaged over the
blocks (and the worst block), and the mean over all its logged steps and blocks; then per (arm, LR)
the mean and range over seeds. Finished jobs only: those without the key (dense arms, telemetry
off), running, failed and diverged ones are left out.

    python -m gptlab.analysis.sweep.moe_load multirun/claims/ablate_moe
"""

from __future__ import annotations

import re
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gptlab.analysis.sweep.jobs import Job, read_sweep

KEY = re.compile(r"^moe/block_(\d+)/max_over_mean_load$")
DEAD = re.compile(r"^moe/block_(\d+)/dead_experts$")


@dataclass
class JobLoad:
    """One job's balance: at its last telemetry step (mean and max over blocks), over its run, and
    its dead experts (summed over blocks) at that step."""

    step: int
    final_mean: float
    final_max: float
    run_mean: float
    dead: float


def job_load(job: Job) -> JobLoad | None:
    """The job's balance from its CSV log, or None when it logged no max/mean load."""
    series = {k: v for k, v in job.log.items() if KEY.match(k) and v}
    if not series:
        return None
    step = min(max(s for s, _ in v) for v in series.values())  # the last step every block logged
    final = [dict(v)[step] for v in series.values()]
    dead = [dict(v).get(step, 0.0) for k, v in job.log.items() if DEAD.match(k)]
    every = [x for v in series.values() for _, x in v]
    return JobLoad(step, statistics.fmean(final), max(final), statistics.fmean(every), sum(dead))


def _spread(xs: list[float]) -> str:
    mean = statistics.fmean(xs)
    return f"{mean:.3f}" if len(xs) == 1 else f"{mean:.3f} [{min(xs):.3f}–{max(xs):.3f}]"


def table(jobs: Sequence[Job], arm_key: str | None = None) -> list[str]:
    """Markdown rows per (arm, LR) over the seeds with a log; the arm is `arm_key`'s value (default:
    the first swept key that is not optim.lr or seed)."""
    groups: dict[tuple[str, str], list[JobLoad]] = {}
    for job in jobs:
        load = job_load(job) if job.status == "finished" else None  # not a running or failed job
        if load is None:
            continue
        values = job.values
        key = arm_key or next((k for k in values if k not in ("optim.lr", "seed")), "")
        groups.setdefault((values.get(key, "?"), values.get("optim.lr", "?")), []).append(load)
    lines = [
        "| arm | LR | seeds | step | max/mean load at the last step, mean over blocks | worst block "
        "| max/mean load over the run | dead experts at the last step |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for (arm, lr), loads in sorted(groups.items(), key=lambda kv: (kv[0][0], float(kv[0][1]))):
        steps = sorted({x.step for x in loads})
        lines.append(
            f"| `{arm}` | {lr} | {len(loads)} | {', '.join(map(str, steps))} "
            f"| {_spread([x.final_mean for x in loads])} | {max(x.final_max for x in loads):.3f} "
            f"| {_spread([x.run_mean for x in loads])} | {sum(x.dead for x in loads):g} |"
        )
    return lines


def main(argv: Sequence[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m gptlab.analysis.sweep.moe_load <sweep dir>", file=sys.stderr)
        return 2
    try:
        jobs = read_sweep(argv[0])
    except FileNotFoundError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    lines = table(jobs)
    if len(lines) == 2:
        print(f"error: no job in {argv[0]!r} logged moe/block_XX/max_over_mean_load; give a sweep of "
              "model/ffn=moe jobs with callbacks.telemetry.enabled=true", file=sys.stderr)  # fmt: skip
        return 2
    print(f"sweep: {Path(argv[0])}")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
