"""Paper 1, Fig. 3A: loss and accuracy of the memory mapping (mem), the reasoning mapping on
trained anchor pairs (rsn_train) and on held-out pairs (rsn_test), for large (γ 0.3) and small (γ 0.8)
initialization (and γ 0.5 at the paper's size): the mean over seeds with a band from the lowest to
the highest seed.

    python examples/fig_p1_accuracy.py --size quick -o figures [--seeds 3]
"""
import numpy as np

import probe
from probe.figures import claim, run_script
from probe.chart import GROUP_COLORS, pyplot, seed_band

NAME = "p1-accuracy"
TITLE = "Paper 1 Fig. 3A: loss and accuracy per split against γ (transformer, anchor task)"
SPLITS = ("mem", "rsn_train", "rsn_test")


def runs(ctx):
    return ctx.anchor((0.3, 0.8) if ctx.quick else (0.3, 0.5, 0.8), seeds=True)


def effect(ctx, runs):
    acc = {g: [probe.info(p)["metrics"]["rsn_test"]["acc"] for p in paths] for g, paths in runs.items()}
    return [claim("γ 0.8 answers the held-out anchor pairs: rsn_test accuracy > 0.5", acc[0.8], lambda v: v > 0.5),
            claim("γ 0.3 does not: rsn_test accuracy < 0.5", acc[0.3], lambda v: v < 0.5)]


def make(ctx, runs):
    plt = pyplot()
    fig, axes = plt.subplots(2, len(runs), figsize=(3.4 * len(runs), 5.2), sharex=True, sharey="row")
    for col, (gamma, paths) in enumerate(runs.items()):
        per_seed = []
        for path in paths:
            with probe.Run(path) as run:
                steps, metrics = run.steps, run.metrics()
            per_seed.append(metrics)
        for row, metric in enumerate(("loss", "acc")):
            ax = axes[row, col]
            for split in SPLITS:
                seed_band(ax, steps, np.array([m[split][metric] for m in per_seed]), GROUP_COLORS[split],
                          label=split)
            ax.set_title(f"γ = {gamma}" if row == 0 else "")
            ax.set_xlabel("step" if row == 1 else "")
        axes[0, col].set_yscale("log")
    axes[0, 0].set_ylabel("cross-entropy loss")
    axes[1, 0].set_ylabel("accuracy")
    axes[1, 0].set_ylim(-0.02, 1.02)
    axes[0, -1].legend(frameon=False)
    fig.suptitle(f"{TITLE}; mean and range over {len(runs[0.8])} seed(s)")
    return ctx.save(fig, NAME)


if __name__ == "__main__":
    run_script(make)
