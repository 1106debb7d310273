"""The qk-norm-at-high-LR sweep (docs/ablations.md §7): the largest attention logit over blocks and
the train loss against step per job, and the table the doc prints.

The sweep is a plain `-m optim.lr=... model/qk_norm=off,on` multirun; each job's CSV log holds the
`attn_logit_max/block_XX` and `train/loss` columns telemetry wrote.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path


@dataclass
class QKJob:
    """One job of the sweep: its two swept values, its curves and its metrics.json."""

    lr: float
    qk_norm: str
    logit_steps: list[int]
    logit_max: list[float]
    loss_steps: list[int]
    loss: list[float]
    metrics: dict


def _override(overrides: str, key: str) -> str:
    """The value of `key=` in a job's .hydra/overrides.yaml (one `- key=value` per line)."""
    return next(line.split("=", 1)[1] for line in overrides.splitlines() if f"{key}=" in line)


def read_job(job: Path) -> QKJob:
    """The job's curves from csv/metrics.csv, its lr and qk_norm from its overrides."""
    overrides = (job / ".hydra" / "overrides.yaml").read_text()
    row = QKJob(float(_override(overrides, "optim.lr")), _override(overrides, "qk_norm"), [], [], [], [], {})
    with open(job / "csv" / "metrics.csv") as f:
        for r in csv.DictReader(f):
            logits = [float(v) for k, v in r.items() if k.startswith("attn_logit_max/") and v]
            if logits:
                row.logit_steps.append(int(r["step"]))
                row.logit_max.append(max(logits))
            if r.get("train/loss"):
                row.loss_steps.append(int(r["step"]))
                row.loss.append(float(r["train/loss"]))
    row.metrics = json.loads((job / "metrics.json").read_text())
    return row


def read_sweep(sweep: Path) -> list[QKJob]:
    """Every job of the sweep that wrote a CSV log, by lr then qk_norm."""
    jobs = [read_job(p) for p in sweep.iterdir() if p.is_dir() and (p / "csv" / "metrics.csv").exists()]
    return sorted(jobs, key=lambda j: (j.lr, j.qk_norm))


def plot(jobs: list[QKJob], out: Path) -> None:
    """Max attention logit (log scale) and train loss against step, one line per job."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for j in jobs:
        label = f"lr={j.lr:g} qk_norm={j.qk_norm}"
        left.plot(j.logit_steps, j.logit_max, label=label)
        right.plot(j.loss_steps, j.loss, label=label)
    left.set(yscale="log", xlabel="step", ylabel="max attention logit (all blocks)")
    right.set(xlabel="step", ylabel="train loss")
    for ax in (left, right):
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def _loss(metrics: dict, key: str) -> str:
    """A loss to 3 decimals; "—" where metrics.json has none (null: nothing was logged, e.g. a run
    shorter than its log interval)."""
    value = metrics.get(key)
    return "—" if value is None else f"{float(value):.3f}"


def table(jobs: list[QKJob]) -> str:
    """The markdown table of docs/ablations.md §7."""
    nan = float("nan")
    lines = [
        "| lr | qk_norm | max attn logit (run) | at the end | final train loss | final val loss "
        "| spikes | status |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for j in jobs:
        m = j.metrics
        top, last = (max(j.logit_max), j.logit_max[-1]) if j.logit_max else (nan, nan)
        lines.append(
            f"| {j.lr:g} | {j.qk_norm} | {top:.1f} | {last:.1f} | {_loss(m, 'final_train_loss')} "
            f"| {_loss(m, 'final_val_loss')} | {m.get('n_spikes')} | {m.get('status')} |"
        )
    return "\n".join(lines)


def main(sweep: Path, out: Path) -> str:
    """Plot the sweep to `out` and return its table."""
    jobs = read_sweep(sweep)
    if not jobs:
        raise FileNotFoundError(f"{sweep} holds no job with csv/metrics.csv (a qk_norm × lr multirun dir)")
    plot(jobs, out)
    return table(jobs)
