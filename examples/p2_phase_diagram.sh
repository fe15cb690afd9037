#!/usr/bin/env bash
# Paper 2's phase diagram at CPU size (its Figs. 14-16: large lr + large weight decay promote the
# inferential solution): composite-quick (d_model 64, 2 layers, 4,000 steps) over learning rate x weight
# decay x gamma, 3 seeds a cell, then 2 more seeds in each cell whose P(inferential > symmetric) is
# near 1/2 (1 or 2 of 3). One probe-train sweep (folder OUT/grid, then OUT/more for the extra seeds);
# finished runs are reused, so the script can be stopped and started again.
# Summarise with: python examples/p2_phase_table.py OUT -o docs/results/p2-phase.json
# Usage: examples/p2_phase_diagram.sh [OUT (default sweeps/p2-phase)] [JOBS (default 2)]
set -euo pipefail
out=${1:-sweeps/p2-phase}
jobs=${2:-2}
grid=(--grid lr=5e-4,1e-3,2e-3,4e-3 --grid weight_decay=0,0.01,0.1,1.0 --grid gamma=0.5,0.8,1.0)
probe-train sweep --preset composite-quick "${grid[@]}" --grid seed=0:3 --out "$out/grid" --jobs "$jobs"
# the cells near 1/2: two more seeds each (the sweep folder holds only those cells' runs)
python "$(dirname "$0")/p2_phase_table.py" "$out" --near-half | while read -r lr wd gamma; do
  probe-train sweep --preset composite-quick --grid lr="$lr" --grid weight_decay="$wd" --grid gamma="$gamma" \
    --grid seed=3:5 --out "$out/more/lr$lr-wd$wd-g$gamma" --jobs "$jobs"
done
