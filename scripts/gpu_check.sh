#!/usr/bin/env bash
# GPU check (one GPU, e.g. an H200), NOT run in the session that wrote it: the gpt2 preset (124M) in
# bf16 for about a minute each under trainer=fsdp (FSDP2 on a mesh of one) and under DDP on one
# device, then tokens/s and MFU (medians of the logged intervals; the first, with warm-up, is
# skipped by the throughput callback) and the peak GPU memory torch allocated and reserved; then,
# for the same two configs, the planner's prediction beside the measurement (scripts/plan.py: peak
# memory per device from a fake step, tokens/s at the cited MFU), the check of docs/performance.md's
# sizing table on a real GPU.
#
#   bash scripts/gpu_check.sh                 # STEPS=300 BATCH=16 COMPILE=false by default
#   STEPS=600 COMPILE=true bash scripts/gpu_check.sh
#   WHEELS=/path/to/wheels bash scripts/gpu_check.sh   # install missing packages offline first
#
# ~1 minute per run is a guess (no GPU number has been measured here): change STEPS to fit.
# Outputs go to ${OUT:-/tmp/gpu_check}/<run>/ (csv/metrics.csv, metrics.json, peak_memory.json).
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-$([ -x .venv/bin/python ] && echo .venv/bin/python || echo python3)}
STEPS=${STEPS:-300}
BATCH=${BATCH:-16}
COMPILE=${COMPILE:-false}
OUT=${OUT:-/tmp/gpu_check}
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" WANDB_MODE=disabled HYDRA_FULL_ERROR=1

if ! "$PY" -c "import hydra, omegaconf, datasets, lightning" 2>/dev/null; then
  if [ -n "${WHEELS:-}" ]; then
    "$PY" -m pip install --no-index --find-links "$WHEELS" hydra-core omegaconf datasets lightning
  else
    echo "missing packages (hydra-core, omegaconf, datasets, lightning): set WHEELS=<dir of wheels>" >&2
    exit 2
  fi
fi
"$PY" -c "import torch; assert torch.cuda.is_available(), 'no CUDA device'; print(torch.__version__, torch.cuda.get_device_name())"

# train.py in this process with an exit hook that records torch's peak memory (one GPU: no workers)
run() {
  local name=$1; shift
  local dir="$OUT/$name"
  rm -rf "$dir"
  echo "== $name: $*"
  local t0=$SECONDS
  PEAK_FILE="$dir/peak_memory.json" "$PY" - "$@" "hydra.run.dir=$dir" <<'PYEOF'
import atexit, json, os, runpy, sys
import torch
def peak():
    path = os.environ["PEAK_FILE"]
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump({"max_allocated_gib": torch.cuda.max_memory_allocated() / 2**30,
                   "max_reserved_gib": torch.cuda.max_memory_reserved() / 2**30}, f)
atexit.register(peak)
sys.argv = ["train.py", *sys.argv[1:]]
runpy.run_path("train.py", run_name="__main__")
PYEOF
  echo "   wall $((SECONDS - t0))s"
}

COMMON=(model=gpt2 trainer.accelerator=gpu trainer.devices=1 trainer.precision=bf16-mixed
  "trainer.max_steps=$STEPS" "trainer.val_check_interval=$STEPS" "data.val_windows=$((5 * BATCH))"
  trainer.log_every_n_steps=20 callbacks.telemetry.every_n_steps=100 callbacks.telemetry.figures=false
  "data.batch_size=$BATCH" data.max_bytes=50000000 "data.cache_dir=$OUT/cache"
  sample.max_new_tokens=0 trainer.enable_progress_bar=false logger=csv "compile=$COMPILE"
  optim.warmup_steps=50)

run fsdp trainer=fsdp "${COMMON[@]}"
run ddp trainer.strategy=ddp "${COMMON[@]}"

"$PY" - "$OUT" <<'PYEOF'
import csv, json, statistics, sys
from pathlib import Path
out = Path(sys.argv[1])
print(f"{'run':6} {'tokens/s':>12} {'MFU':>7} {'peak alloc GiB':>15} {'peak reserved GiB':>18}")
for name in ("fsdp", "ddp"):
    d = out / name
    tps, mfu = [], []
    with open(d / "csv" / "metrics.csv") as f:
        for row in csv.DictReader(f):
            if row.get("throughput/tokens_per_sec"):
                tps.append(float(row["throughput/tokens_per_sec"]))
            if row.get("throughput/mfu"):
                mfu.append(float(row["throughput/mfu"]))
    peak = json.loads((d / "peak_memory.json").read_text())
    med = lambda xs: statistics.median(xs) if xs else float("nan")
    print(f"{name:6} {med(tps):12.0f} {med(mfu):7.3f} {peak['max_allocated_gib']:15.2f} "
          f"{peak['max_reserved_gib']:18.2f}")
PYEOF

# the planner's prediction for the same overrides, beside what was measured (docs/performance.md, Planning)
"$PY" - "$OUT" "${COMMON[@]}" <<'PYEOF'
import csv, json, statistics, sys
from pathlib import Path
import torch
from gptlab.compose import compose_config
from gptlab.hardware import GPUS, chip
from gptlab.planning.options import setup_from
from gptlab.planning.plan import GIB, plan
out, common = Path(sys.argv[1]), sys.argv[2:]
name = torch.cuda.get_device_name()
if chip(name) is None:
    sys.exit(f"planner: {name} is not in gptlab.hardware's GPU table; no prediction")
gpu = GPUS[chip(name)]
torch.set_num_threads(1)
print(f"planner on {gpu.name}: {'run':6} {'peak GiB pred':>14} {'alloc GiB meas':>15} {'pred/meas':>10} "
      f"{'tokens/s pred':>14} {'tokens/s meas':>14} {'MFU pred':>9}")
for run, extra in (("fsdp", ["trainer=fsdp"]), ("ddp", ["trainer.strategy=ddp"])):
    p = plan(setup_from(compose_config([*extra, *common])), gpu)
    peak = json.loads((out / run / "peak_memory.json").read_text())["max_allocated_gib"]
    with open(out / run / "csv" / "metrics.csv") as f:
        tps = [float(r["throughput/tokens_per_sec"]) for r in csv.DictReader(f) if r.get("throughput/tokens_per_sec")]
    meas = statistics.median(tps) if tps else float("nan")
    pred_tps = p.speed.tokens_per_sec if p.speed else float("nan")
    mfu = p.speed.mfu if p.speed else float("nan")
    print(f"{'':>20}{run:6} {p.memory.peak / GIB:14.2f} {peak:15.2f} {p.memory.peak / GIB / peak:10.2f} "
          f"{pred_tps:14.0f} {meas:14.0f} {mfu:9.3f}")
PYEOF
