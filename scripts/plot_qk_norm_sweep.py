"""Plot a `-m optim.lr=... model/qk_norm=off,on` sweep: max attention logit over blocks and train loss
against step, and print the table of docs/ablations.md (section 7).

usage: python scripts/plot_qk_norm_sweep.py <hydra.sweep.dir> <out.png>
"""

import csv
import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

sweep = Path(sys.argv[1])
out = Path(sys.argv[2])
fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4))
rows_out = []
for job in sorted(p for p in sweep.iterdir() if p.is_dir() and (p / "csv" / "metrics.csv").exists()):
    over = (job / ".hydra" / "overrides.yaml").read_text()
    lr = [x.split("=")[1] for x in over.split("\n") if "optim.lr=" in x][0]
    qk = [x.split("=")[1] for x in over.split("\n") if "qk_norm=" in x][0]
    steps, logit, lsteps, loss = [], [], [], []
    with open(job / "csv" / "metrics.csv") as f:
        for r in csv.DictReader(f):
            vals = [float(v) for k, v in r.items() if k.startswith("attn_logit_max/") and v]
            if vals:
                steps.append(int(r["step"]))
                logit.append(max(vals))
            if r.get("train/loss"):
                lsteps.append(int(r["step"]))
                loss.append(float(r["train/loss"]))
    m = json.loads((job / "metrics.json").read_text())
    label = f"lr={lr} qk_norm={qk}"
    a1.plot(steps, logit, label=label)
    a2.plot(lsteps, loss, label=label)
    rows_out.append(
        (
            float(lr),
            qk,
            max(logit) if logit else float("nan"),
            logit[-1] if logit else float("nan"),
            m.get("final_train_loss"),
            m.get("final_val_loss"),
            m.get("n_spikes"),
            m.get("status"),
        )
    )
a1.set_yscale("log")
a1.set_xlabel("step")
a1.set_ylabel("max attention logit (all blocks)")
a1.legend(fontsize=7)
a2.set_xlabel("step")
a2.set_ylabel("train loss")
a2.legend(fontsize=7)
fig.tight_layout()
fig.savefig(out, dpi=110)
print(
    "| lr | qk_norm | max attn logit (run) | at the end | final train loss | final val loss "
    "| spikes | status |"
)
print("|---|---|---|---|---|---|---|---|")
for r in sorted(rows_out):
    print(f"| {r[0]:g} | {r[1]} | {r[2]:.1f} | {r[3]:.1f} | {r[4]:.3f} | {r[5]:.3f} | {r[6]} | {r[7]} |")
