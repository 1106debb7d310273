#!/usr/bin/env bash
# The claims set of issue 13 (docs/ablations.md), sized for <= 2 h on 2 CPU cores: two streams of
# sweeps run side by side, one thread each. Every sweep writes <dir>/report.md when it ends; a sweep
# that was interrupted is resumed by running this script again (finished jobs are skipped).
#
#   scripts/ablations.sh                 # everything, into multirun/claims
#   OUT=multirun/claims2 scripts/ablations.sh
#
# Budget (docs/ablations.md, "Budget"): d=64 (FFN/tying d=96), T=64, batch 8, 400 steps, warmup 40,
# cosine, clip 1.0, 5 log-spaced LRs in [1e-3, 3e-2], 3 seeds. Estimated job times on one quiet core:
# L=2 ~19 s, L=8 ~47 s, d=96 L=4 ~49 s (0.016 s + 0.012 s per layer per step at d=64, measured, plus
# ~3 s per job for validation, checkpoints and wandb). Stream A ~5,800 s, stream B ~5,900 s: ~1.65 h.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
OUT=${OUT:-multirun/claims}
export OMP_NUM_THREADS=1 WANDB_SILENT=true
mkdir -p "$OUT"

timed() {  # timed <name> <train.py args...>: run one sweep, append its wall time to $OUT/times.txt
  local name=$1 start=$SECONDS
  shift
  "$PY" "$@" >"$OUT/$name.log" 2>&1 || echo "$name: exit $? (see $OUT/$name.log)" >>"$OUT/times.txt"
  echo "$name $((SECONDS - start)) s" >>"$OUT/times.txt"
}

stream_a() {
  # LR sensitivity of pre/post/sandwich/deepnorm (Wortsman et al. 2023) and DeepNorm vs post-LN at
  # depth (Wang et al. 2022): 4 arms x 5 LR x 3 seeds at L=8, warmup 40. 60 jobs x ~47 s.
  timed placement train.py -m experiment=ablate_placement hydra.sweep.dir="$OUT/placement"
  # Gated FFN vs GELU at equal parameters (Shazeer 2020): 2 arms x 5 x 3 at d=96, L=4. 30 x ~49 s.
  timed ffn train.py -m experiment=ablate_ffn model/ffn=gelu,swiglu hydra.sweep.dir="$OUT/ffn"
  # Tied vs untied embeddings (Press & Wolf 2017): 2 x 5 x 3 at d=96, L=4. 30 x ~49 s.
  timed tying train.py -m experiment=ablate_tying hydra.sweep.dir="$OUT/tying"
}

stream_b() {
  # Post-LN needs warmup at depth, pre-LN does not (Xiong et al. 2020): the arm is the warmup (0 vs
  # 40 steps, baseline 40), one cell per placement; telemetry gives their Fig. 3 profile. 60 x ~47 s.
  timed warmup train.py -m experiment=ablate_placement hydra.sweeper.arm=optim.warmup_steps \
    "hydra.sweeper.arms=[0,40]" hydra.sweeper.baseline=40 model/placement=pre,post \
    hydra.sweep.dir="$OUT/warmup"
  # GPT-2's depth-scaled init vs none vs per-layer, across depth; also the depth check (global at
  # L=2 vs L=8). 3 x 5 x 3 per depth: 45 x ~19 s (L=2) + 45 x ~47 s (L=8).
  timed init_L2 train.py -m experiment=ablate_init model.n_layer=2 hydra.sweep.dir="$OUT/init_L2"
  timed init_L8 train.py -m experiment=ablate_init model.n_layer=8 hydra.sweep.dir="$OUT/init_L8"
  # The seeds' variance law at init (v_2L = v0 + 2L·σ², flat under 1/sqrt(2L)) and the gradient
  # profile at init in Xiong et al.'s setting; no training, ~30 s each.
  timed init_report_L8 scripts/init_report.py model=pre_rmsnorm_swiglu model.n_layer=8 out="$OUT/init_report_L8"
  timed init_report_L24 scripts/init_report.py model=pre_rmsnorm_swiglu model.n_layer=24 out="$OUT/init_report_L24"
  timed init_report_xiong scripts/init_report.py model=post_layernorm_gelu model.n_layer=8 \
    "model.init_std='1/sqrt(d)'" model.depth_scaled_init=none out="$OUT/init_report_xiong"
}

start=$SECONDS
stream_a &
stream_b &
wait
echo "all $((SECONDS - start)) s" >>"$OUT/times.txt"
cat "$OUT/times.txt"
