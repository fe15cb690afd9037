"""Paper 1, Fig. 3B: the Emb-MLP (the theory's simplest model) on the anchor task: final
accuracy per split against γ, and the held-out accuracy during training.

    python examples/fig_p1_emb_mlp.py --size quick -o figures
"""
import numpy as np

import probe
from probe.figures import run_script
from probe.plotting import GROUP_COLORS, gamma_color, pyplot

NAME = "p1-emb-mlp"
TITLE = "Paper 1 Fig. 3B: Emb-MLP accuracy against γ"
SPLITS = ("mem", "rsn_train", "rsn_test")


def make(ctx):
    runs = ctx.emb_mlp((0.3, 0.5, 0.8))
    plt = pyplot()
    fig, (bars, curves) = plt.subplots(1, 2, figsize=(8.5, 3.3))
    width = 0.8 / len(SPLITS)
    x = np.arange(len(runs))
    for k, split in enumerate(SPLITS):
        acc = [probe.info(p)["metrics"][split]["acc"] for p in runs.values()]
        bars.bar(x + (k - 1) * width, acc, width, color=GROUP_COLORS[split], label=split)
    bars.set_xticks(x, [f"γ = {g}" for g in runs])
    bars.set_ylabel("final accuracy")
    bars.set_ylim(0, 1.05)
    bars.legend(frameon=False)
    bars.set_title("accuracy at the last step")
    for gamma, path in runs.items():
        with probe.Run(path) as run:
            curves.plot(run.steps, run.metrics()["rsn_test"]["acc"], color=gamma_color(gamma), label=f"γ = {gamma}")
    curves.set_xlabel("step")
    curves.set_ylabel("rsn_test accuracy (held-out pairs)")
    curves.set_ylim(-0.02, 1.02)
    curves.legend(frameon=False)
    curves.set_title("generalisation during training")
    fig.suptitle(TITLE)
    return ctx.save(fig, NAME)


if __name__ == "__main__":
    run_script(make)
