#!/usr/bin/env bash
# Paper 2's direction at CPU size: P(inferential > symmetric on (4,3)) over gamma x one setting at a
# time, 5 seeds per cell, 2 layers (the paper's depth). Every folder is a sweep; summarise one with
#   probe sweep-summary OUT/<variant>
# Finished runs are reused, so the script can be stopped and started again. About 2 h on 2 cores (width256 alone takes half of it).
# Usage: examples/p2_direction_map.sh [OUT (default sweeps/p2-map)] [JOBS (default 2)]
set -euo pipefail
out=${1:-sweeps/p2-map}
jobs=${2:-2}
sweep() { local name=$1; shift
  probe-train sweep --preset composite-quick "$@" --grid layers=2 --grid seed=0:5 --out "$out/$name" --jobs "$jobs"; }

# composite-quick as it is (d_model 64, 4000 steps, wd 0.1, 30k sequences): init std 64^-gamma
sweep base     --grid gamma=0.3,0.5,0.8,1.0,1.2,1.5
# three times longer: small inits (gamma >= 1) do not fit the training data in 4000 steps
sweep long     --grid gamma=0.8,1.0,1.2 --grid steps=12000 --grid snapshot_every=500
# twice the width: the same gamma is a smaller init std (128^-gamma)
sweep width    --grid gamma=0.5,0.8,1.0 --grid d_model=128 --grid d_ff=512
# the authors' code: warm-up from lr/20, cosine to lr/20, output-head bias, LayerNorm biases,
# decay on every parameter, weight decay 0.01
sweep authors  --grid gamma=0.5,0.8,1.0 --grid warmup_from=1e-4 --grid min_lr=1e-4 \
               --grid head_bias=true --grid norm_bias=true --grid decay=all --grid weight_decay=0.01
# weight decay alone, 0.01 instead of 0.1
sweep wd       --grid gamma=0.5,0.8,1.0 --grid weight_decay=0.01
# more data: 100k sequences instead of 30k (same steps)
sweep data     --grid gamma=0.5,0.8,1.0 --grid n_samples=100000
# four times the width (256^-gamma: gamma 0.8 is std 0.012, near the paper's 400^-0.8 = 0.0083); the
# slowest variant (about 10 min a run on one core), so last; gamma 1.0 is left out: at d 128 it did not
# fit the training data in 4000 steps (0/5), and at d 256 its std is half that
sweep width256 --grid gamma=0.5,0.8 --grid d_model=256 --grid d_ff=1024
