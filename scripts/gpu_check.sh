#!/usr/bin/env bash
# The GPU check on a lent GPU (one H100, at most 8 minutes): installs the wheels `make gpu-wheels`
# put in .whl/ (offline, nothing else), then runs `python -m gptlab.bench.gpu_check`, which writes
# gpu_check.json and gpu_check.md to $OUT. docs/performance.md ("GPU: not measured in this session").
#   bash scripts/gpu_check.sh [--only sections] [--budget seconds]
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ -d .whl ]; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/gptlab/site-packages .whl/*.whl
  export PYTHONPATH=/tmp/gptlab/site-packages
fi
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" WANDB_MODE=disabled PYTHONUNBUFFERED=1
exec "$PY" -m gptlab.bench.gpu_check --out "${OUT:-gpu_check_out}" "$@"
