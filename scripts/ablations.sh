#!/usr/bin/env bash
# The claims set of issue 13 (docs/ablations.md), sized for <= 2 h on 2 CPU cores. One command per
# sweep; each runs its jobs side by side on the node's slots (hydra/launcher=slots, one thread per
# job on CPU). Every sweep writes <dir>/report.md when it ends; a sweep that was interrupted is
# resumed by running this script again (finished jobs are skipped).
#
#   scripts/ablations.sh                       # everything, into multirun/claims, 2 jobs at a time
#   OUT=multirun/claims2 SLOTS=4 scripts/ablations.sh
#
# Budget (docs/ablations.md, "Budget"): T=64, batch 16, 400 steps (409,600 tokens), warmup 40,
# cosine, clip 1.0, 5 log-spaced LRs in [1e-3, 3e-2], 3 seeds; d=32 with 2 heads for the depth sweeps
# (placement, warmup, init), d=96 L=4 for FFN and tying (8/3·96 = 256 exactly). Measured on
# 2026-12-01 with two jobs at a time: d=32 L=8 ~33 s a job, L=2 ~10 s, d=96 L=4 ~44 s; ~1.4 h in all
# (docs/ablations.md, Claims), plus 990-1,341 s for the FFN ladder and 1,085 s for the depth ladder
# (issue 24, measured 2026-12-02 at load 3-15): about 2 h in all.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
OUT=${OUT:-multirun/claims}
SLOTS=${SLOTS:-2}
export WANDB_SILENT=true
mkdir -p "$OUT"
SIDE_BY_SIDE=(hydra.launcher.slots="$SLOTS" hydra.launcher.threads=1)

timed() {  # timed <name> <train.py args...>: run one sweep, append its wall time to $OUT/times.txt
  local name=$1 start=$SECONDS
  shift
  "$PY" "$@" >"$OUT/$name.log" 2>&1 || echo "$name: exit $? (see $OUT/$name.log)" >>"$OUT/times.txt"
  echo "$name $((SECONDS - start)) s" >>"$OUT/times.txt"
}

start=$SECONDS
# LR sensitivity of pre/post/sandwich/deepnorm (Wortsman et al. 2023) and DeepNorm vs post-LN at
# depth (Wang et al. 2022): 4 arms x 5 LR x 3 seeds at L=8, warmup 40. 60 jobs x ~31 s.
timed placement train.py -m experiment=ablate_placement hydra.sweep.dir="$OUT/placement" "${SIDE_BY_SIDE[@]}"
# Gated FFN vs GELU at equal parameters (Shazeer 2020): 2 arms x 5 x 3 at d=96, L=4. 30 x ~43 s.
timed ffn train.py -m experiment=ablate_ffn model/ffn=gelu,swiglu hydra.sweep.dir="$OUT/ffn" "${SIDE_BY_SIDE[@]}"
# Tied vs untied embeddings (Press & Wolf 2017): 2 x 5 x 3 at d=96, L=4. 30 x ~49 s.
timed tying train.py -m experiment=ablate_tying hydra.sweep.dir="$OUT/tying" "${SIDE_BY_SIDE[@]}"
# Post-LN needs warmup at depth, pre-LN does not (Xiong et al. 2020): the arm is the warmup (0 vs
# 40 steps, baseline 40), one cell per placement; telemetry gives their Fig. 3 profile. 60 x ~31 s.
timed warmup train.py -m experiment=ablate_placement hydra.sweeper.arm=optim.warmup_steps \
  "hydra.sweeper.arms=[0,40]" hydra.sweeper.baseline=40 model/placement=pre,post \
  hydra.sweep.dir="$OUT/warmup" "${SIDE_BY_SIDE[@]}"
# GPT-2's depth-scaled init vs none vs per-layer, across depth, in one sweep whose cells are
# n_layer 2 and 8: its report's "Across cells" table is the depth check (each arm at L=8 against
# itself at L=2). 5 seeds, not 3: with 3 the L=2 model's best LR (the grid's top) had a seed
# spread of 0.2 and the check's interval could not exclude 0 (docs/ablations.md). 3 x 5 x 5 per
# depth: 75 x ~10 s (L=2) + 75 x ~32 s (L=8).
timed init train.py -m experiment=ablate_init hydra.sweeper.seeds=5 hydra.sweep.dir="$OUT/init" "${SIDE_BY_SIDE[@]}"
# Does the gated FFN's win survive scale (issue 24)? A ladder of 4 widths (d = 24..96, L = d/24), 3 LRs
# per width placed by the ladder's rule, 3 seeds, 204,800 tokens per job: 72 jobs. The report fits
# L(N) = E + A·N^(-alpha) per arm and extrapolates the gap to 10x the largest N.
timed ladder_ffn train.py -m experiment=ladder_ffn hydra.sweep.dir="$OUT/ladder_ffn" "${SIDE_BY_SIDE[@]}"
# Post-LN against pre-LN across depth (issue 24's second ladder): d=32, L = 2, 4, 8, 16, 3 LRs, 3 seeds,
# 204,800 tokens per job: 72 jobs, 1,085 s measured 2026-12-02.
timed ladder_placement train.py -m experiment=ladder_placement hydra.sweep.dir="$OUT/ladder_placement" "${SIDE_BY_SIDE[@]}"
# The seeds' variance law at init (v_2L = v0 + 2L·σ², flat under 1/sqrt(2L)) and the gradient
# profile at init in Xiong et al.'s setting; no training, ~30 s each.
timed init_report_L8 scripts/init_report.py model=pre_rmsnorm_swiglu model.n_layer=8 out="$OUT/init_report_L8"
timed init_report_L24 scripts/init_report.py model=pre_rmsnorm_swiglu model.n_layer=24 out="$OUT/init_report_L24"
timed init_report_xiong scripts/init_report.py model=post_layernorm_gelu model.n_layer=8 \
  "model.init_std='1/sqrt(d)'" model.depth_scaled_init=none out="$OUT/init_report_xiong"
echo "all $((SECONDS - start)) s" >>"$OUT/times.txt"
cat "$OUT/times.txt"
