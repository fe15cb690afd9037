#!/usr/bin/env bash
# Paper 2's phase diagram at CPU size (its Figs. 14-16: large lr + large weight decay promote the
# inferential solution): composite-quick (d_model 64, 2 layers, 4,000 steps) over learning rate x weight
# decay x gamma, 3 seeds a cell, then 2 more seeds in each cell where 1, 2 or 3 of the 3 are inferential >
# symmetric (near 1/2, or all three: 5 of 5 is the first count whose Wilson interval clears 1/2). One probe-train sweep (folder OUT/grid, then OUT/more for the extra seeds);
# finished runs are reused, so the script can be stopped and started again.
# Summarise with: python examples/p2_phase_table.py OUT -o docs/results/p2-phase.json
# Usage: examples/p2_phase_diagram.sh [OUT (default sweeps/p2-phase)] [JOBS (default 2)]
set -euo pipefail
out=${1:-sweeps/p2-phase}
jobs=${2:-2}
grid=(--grid lr=5e-4,1e-3,2e-3,4e-3 --grid weight_decay=0,0.01,0.1,1.0 --grid gamma=0.5,0.8,1.0)
probe-train sweep --preset composite-quick "${grid[@]}" --grid seed=0:3 --out "$out/grid" --jobs "$jobs"
# those cells: two more seeds each (a sweep folder per cell holds only its further runs)
python "$(dirname "$0")/p2_phase_table.py" "$out" --near-half | while read -r lr wd gamma; do
  probe-train sweep --preset composite-quick --grid lr="$lr" --grid weight_decay="$wd" --grid gamma="$gamma" \
    --grid seed=3:5 --out "$out/more/lr$lr-wd$wd-g$gamma" --jobs "$jobs"
done
