"""Paper 1, Fig. 3A: loss and accuracy of the memory mapping (mem), the reasoning mapping on
trained anchor pairs (rsn_train) and on held-out pairs (rsn_test), for γ = 0.3, 0.5, 0.8.

    python examples/fig_p1_accuracy.py --size quick -o figures
"""
import probe
from probe.figures import run_script
from probe.plotting import GROUP_COLORS, pyplot

NAME = "p1-accuracy"
TITLE = "Paper 1 Fig. 3A: loss and accuracy per split against γ (transformer, anchor task)"
SPLITS = ("mem", "rsn_train", "rsn_test")


def make(ctx):
    runs = ctx.anchor((0.3, 0.5, 0.8))
    plt = pyplot()
    fig, axes = plt.subplots(2, len(runs), figsize=(3.4 * len(runs), 5.2), sharex=True, sharey="row")
    for col, (gamma, path) in enumerate(runs.items()):
        with probe.Run(path) as run:
            steps, metrics = run.steps, run.metrics()
        for row, metric in enumerate(("loss", "acc")):
            ax = axes[row, col]
            for split in SPLITS:
                ax.plot(steps, metrics[split][metric], color=GROUP_COLORS[split], label=split)
            ax.set_title(f"γ = {gamma}" if row == 0 else "")
            ax.set_xlabel("step" if row == 1 else "")
        axes[0, col].set_yscale("log")
    axes[0, 0].set_ylabel("cross-entropy loss")
    axes[1, 0].set_ylabel("accuracy")
    axes[1, 0].set_ylim(-0.02, 1.02)
    axes[0, -1].legend(frameon=False)
    fig.suptitle(TITLE)
    return ctx.save(fig, NAME)


if __name__ == "__main__":
    run_script(make)
