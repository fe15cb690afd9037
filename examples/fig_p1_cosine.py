"""Paper 1, Fig. 4A: cosine similarity of memory-anchor and reasoning-anchor embeddings at an
early and the last step (small initialization, γ = 0.8): reasoning anchors form a band ordered
by value, memory anchors lose their shared direction.

    python examples/fig_p1_cosine.py --size quick -o figures
"""
import probe
from probe.figures import run_script
from probe.plotting import heatmap, pyplot

NAME = "p1-cosine"
TITLE = "Paper 1 Fig. 4A: embedding cosine similarity, memory vs reasoning anchors (γ = 0.8)"


def make(ctx):
    path = ctx.anchor((0.8,))[0.8]   # only what it draws
    with probe.Run(path) as run:
        steps = [int(s) for s in run.steps]
    early = next(s for s in steps if s >= steps[-1] / 12)   # step 250 of 3000: memory anchors still alike
    plt = pyplot()
    fig, axes = plt.subplots(2, 2, figsize=(7.4, 6.6), constrained_layout=True)
    im = None
    for row, group in enumerate(("memory", "reasoning")):
        for col, step in enumerate((early, steps[-1])):
            r = probe.similarity(path, group, step=step)[0]
            ax = axes[row, col]
            im = heatmap(ax, r.matrix, r.ids, r.ids)
            ax.set_title(f"{group} anchors, step {step}\nmean {r.mean_offdiag:.2f}, ρ(|i−j|) {r.distance_corr:.2f}")
            ax.set_xlabel("token")
            ax.set_ylabel("token")
    fig.colorbar(im, ax=axes, shrink=0.8, label="cosine similarity")
    fig.suptitle(TITLE)
    return ctx.save(fig, NAME)


if __name__ == "__main__":
    run_script(make)
