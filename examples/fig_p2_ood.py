"""Paper 2, Fig. 2: on the unseen anchor pair (4,3), the accuracy against the inferential target
x − 10 (the primitives composed) and the symmetric one x − 6 (the taught (3,4) copied), against γ
(mean over seeds with its 95 % interval), and over a γ × depth grid the fraction of seeds whose
answer is inferential (inferential accuracy > symmetric) with its 95 % Wilson interval.

    python examples/fig_p2_ood.py --size quick -o figures [--seeds 5]
"""
import numpy as np

import probe
from probe.analyses.uncertainty import proportion
from probe.figures import claim, run_script
from probe.chart import heatmap, points_with_ci, pyplot

NAME = "p2-ood"
TITLE = "Paper 2 Fig. 2: inferential vs symmetric solution on the unseen pair (4,3)"
CAVEAT = ("at CPU size the paper's direction (γ 0.5 symmetric, γ 0.8 inferential) is not shown; it needs "
          "composite-paper (a GPU, not run here)")


def runs(ctx):
    # at the CPU sizes the two ends of γ at 2 layers; the paper's γ and depths at its size
    if ctx.quick:
        return ctx.composite((0.3, 0.8), (2,), seeds=True)
    return ctx.composite((0.3, 0.5, 0.8), (2, 3), seeds=True)


def _diff(path) -> float:
    m = probe.info(path)["metrics"]
    return m["ood_inferential"]["acc"] - m["ood_symmetric"]["acc"]


def effect(ctx, runs):
    diff = {g: [_diff(p) for p in runs[g, 2]] for g in sorted({g for g, _ in runs})}
    if ctx.quick:
        return [claim("γ 0.3 (2 layers) answers (4,3) by the symmetric rule: inferential − symmetric accuracy < 0",
                      diff[0.3], lambda v: v < 0)]
    return [claim("γ 0.8 (2 layers) is inferential: inferential − symmetric accuracy > 0", diff[0.8], lambda v: v > 0),
            claim("γ 0.5 (2 layers) is symmetric: inferential − symmetric accuracy < 0", diff[0.5], lambda v: v < 0)]


def make(ctx, runs):
    GAMMAS, DEPTHS = sorted({g for g, _ in runs}), sorted({n for _, n in runs})
    acc = {k: [probe.info(p)["metrics"] for p in paths] for k, paths in runs.items()}
    plt = pyplot()
    fig, (line, grid) = plt.subplots(1, 2, figsize=(10, 3.8), constrained_layout=True)
    for n, shift in zip(DEPTHS, (-0.01, 0.01)):
        for split, color in (("ood_inferential", "#1f77b4"), ("ood_symmetric", "#d62728")):
            points_with_ci(line, np.array(GAMMAS) + shift, [[m[split]["acc"] for m in acc[g, n]] for g in GAMMAS],
                           color, label=f"{split.split('_')[1]}, {n} layers", linestyle="-" if n == 2 else "--")
    line.set_xlabel("initialization rate γ (larger = smaller init)")
    line.set_ylabel("accuracy on (4,3)")
    line.set_ylim(-0.02, 1.02)
    line.legend(frameon=False, fontsize=6)
    line.set_title("inferential (x−10) and symmetric (x−6) accuracy")
    cells = {k: proportion([m["ood_inferential"]["acc"] > m["ood_symmetric"]["acc"] for m in ms])
             for k, ms in acc.items()}
    frac = np.array([[cells[g, n]["fraction"] for g in GAMMAS] for n in DEPTHS])
    im = heatmap(grid, frac, GAMMAS, DEPTHS, vmin=0, vmax=1, cmap="coolwarm_r", xrotation=0, origin="lower",
                 aspect="auto")
    for i, n in enumerate(DEPTHS):
        for j, g in enumerate(GAMMAS):
            c = cells[g, n]
            grid.text(j, i, f"{c['k']}/{c['n']}\n[{c['ci_lo']:.2f}, {c['ci_hi']:.2f}]", ha="center", va="center",
                      fontsize=7)
    grid.set_xlabel("γ")
    grid.set_ylabel("layers")
    grid.set_title("P(inferential) over seeds, 95% Wilson interval")
    fig.colorbar(im, ax=grid, shrink=0.85, label="fraction of seeds inferential")
    fig.suptitle(ctx.title(TITLE, CAVEAT))
    return ctx.save(fig, NAME)


if __name__ == "__main__":
    run_script(make)
