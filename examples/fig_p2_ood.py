"""Paper 2, Fig. 2: on the unseen anchor pair (4,3), the accuracy against the inferential target
x − 10 (the primitives composed) and the symmetric one x − 6 (the taught (3,4) copied), against γ,
and the inferential-minus-symmetric accuracy over a small γ × depth grid.

    python examples/fig_p2_ood.py --size quick -o figures
"""
import numpy as np

import probe
from probe.figures import run_script
from probe.plotting import heatmap, pyplot

NAME = "p2-ood"
TITLE = "Paper 2 Fig. 2: inferential vs symmetric solution on the unseen pair (4,3)"
GAMMAS = (0.3, 0.5, 0.8)
DEPTHS = (2, 3)


def make(ctx):
    runs = ctx.composite(GAMMAS, DEPTHS)
    acc = {k: probe.info(p)["metrics"] for k, p in runs.items()}
    plt = pyplot()
    fig, (line, grid) = plt.subplots(1, 2, figsize=(9.5, 3.6), constrained_layout=True)
    for n, style in zip(DEPTHS, ("-", "--", ":")):
        for split, color in (("ood_inferential", "#1f77b4"), ("ood_symmetric", "#d62728")):
            line.plot(GAMMAS, [acc[g, n][split]["acc"] for g in GAMMAS], style, marker="o", color=color,
                      label=f"{split.split('_')[1]}, {n} layers")
    line.set_xlabel("initialization rate γ (larger = smaller init)")
    line.set_ylabel("accuracy on (4,3)")
    line.set_ylim(-0.02, 1.02)
    line.legend(frameon=False)
    line.set_title("inferential (x−10) and symmetric (x−6) accuracy")
    diff = np.array([[acc[g, n]["ood_inferential"]["acc"] - acc[g, n]["ood_symmetric"]["acc"] for g in GAMMAS]
                     for n in DEPTHS])
    im = heatmap(grid, diff, GAMMAS, DEPTHS, cmap="coolwarm_r", xrotation=0, origin="lower",
                 aspect="auto")
    for (i, j), v in np.ndenumerate(diff):
        grid.text(j, i, f"{v:+.2f}", ha="center", va="center", fontsize=8)
    grid.set_xlabel("γ")
    grid.set_ylabel("layers")
    grid.set_title("phase diagram: inferential − symmetric")
    fig.colorbar(im, ax=grid, shrink=0.85, label="accuracy difference")
    fig.suptitle(TITLE)
    return ctx.save(fig, NAME)


if __name__ == "__main__":
    run_script(make)
