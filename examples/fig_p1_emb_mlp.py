"""Paper 1, Fig. 3B: the Emb-MLP (the theory's simplest model) on the anchor task: final
accuracy per split against γ (0.3 and 0.8 at the CPU sizes, and 0.5 at the paper's) (mean over seeds, 95 % interval, every seed a dot), and the held-out
accuracy during training (mean and range over seeds).

    python examples/fig_p1_emb_mlp.py --size quick -o figures [--seeds 3]
"""
import numpy as np

import probe
from probe.figures import claim, run_script
from probe.chart import GROUP_COLORS, gamma_color, points_with_ci, pyplot, seed_band

NAME = "p1-emb-mlp"
TITLE = "Paper 1 Fig. 3B: Emb-MLP accuracy against γ"
SPLITS = ("mem", "rsn_train", "rsn_test")


def runs(ctx):
    # the two ends at the CPU sizes (what the effect compares), γ 0.5 between them at the paper's size
    return ctx.emb_mlp((0.3, 0.8) if ctx.quick else (0.3, 0.5, 0.8), seeds=True)


def effect(ctx, runs):
    m = {g: [probe.info(p)["metrics"] for p in paths] for g, paths in runs.items()}
    return [claim("γ 0.8 learns the rule: rsn_test accuracy > 0.5", [x["rsn_test"]["acc"] for x in m[0.8]],
                  lambda v: v > 0.5),
            claim("γ 0.3 memorizes: mem accuracy − rsn_test accuracy > 0",
                  [x["mem"]["acc"] - x["rsn_test"]["acc"] for x in m[0.3]], lambda v: v > 0)]


def make(ctx, runs):
    GAMMAS = tuple(runs)
    plt = pyplot()
    fig, (final, curves) = plt.subplots(1, 2, figsize=(8.5, 3.3))
    for k, split in enumerate(SPLITS):
        per_gamma = [[probe.info(p)["metrics"][split]["acc"] for p in runs[g]] for g in GAMMAS]
        points_with_ci(final, np.array(GAMMAS) + (k - 1) * 0.015, per_gamma, GROUP_COLORS[split], label=split)
    final.set_xticks(GAMMAS)
    final.set_xlabel("initialization rate γ")
    final.set_ylabel("final accuracy")
    final.set_ylim(-0.02, 1.05)
    final.legend(frameon=False, fontsize=7)
    final.set_title("accuracy at the last step")
    for gamma in GAMMAS:
        acc = []
        for path in runs[gamma]:
            with probe.Run(path) as run:
                steps, acc_s = run.steps, run.metrics()["rsn_test"]["acc"]
            acc.append(acc_s)
        seed_band(curves, steps, np.array(acc), gamma_color(gamma), label=f"γ = {gamma}")
    curves.set_xlabel("step")
    curves.set_ylabel("rsn_test accuracy (held-out pairs)")
    curves.set_ylim(-0.02, 1.02)
    curves.legend(frameon=False)
    curves.set_title("generalisation during training")
    fig.suptitle(TITLE)
    return ctx.save(fig, NAME)


if __name__ == "__main__":
    run_script(make)
