#!/usr/bin/env bash
# Paper 2's best CPU cells of the phase diagram (docs/results/p2-phase.json) across widths: composite-quick
# with d_ff = 4 d_model at d_model 32, 64, 128, 256, 3 seeds. The gamma-0.5 cell (lr 1e-3, weight decay 1)
# at fixed gamma (std d^-0.5) and at fixed std (--gamma-ref-width 64: 64^-0.5 = 0.125 at every width); the
# gamma-0.8 cell (lr 4e-3, weight decay 0.1) at fixed gamma. One probe-train sweep a width (folders
# OUT/g0.5/dW and OUT/g0.8/dW), the small widths first; finished runs are reused, so the script can be
# stopped and started again. Summarise with: python examples/p2_width_table.py OUT -o docs/results/p2-width.json
# Usage: examples/p2_width_sweep.sh [OUT (default sweeps/p2-width)] [JOBS (default 2)] [WIDTHS (default 32,64,128,256)]
set -euo pipefail
out=${1:-sweeps/p2-width}
jobs=${2:-2}
widths=${3:-32,64,128,256}
for w in ${widths//,/ }; do
  probe-train sweep --preset composite-quick --grid lr=0.001 --grid weight_decay=1.0 --grid gamma=0.5 \
    --grid d_model="$w" --grid d_ff_ratio=4 --grid gamma_ref_width=0,64 --grid seed=0:3 \
    --out "$out/g0.5/d$w" --jobs "$jobs"
  probe-train sweep --preset composite-quick --grid lr=0.004 --grid weight_decay=0.1 --grid gamma=0.8 \
    --grid d_model="$w" --grid d_ff_ratio=4 --grid seed=0:3 --out "$out/g0.8/d$w" --jobs "$jobs"
done
