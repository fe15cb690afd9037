"""Paper 1, Fig. 4B-C: the label distribution P^s − 1/d_vob of each reasoning anchor (a bump
that moves with the anchor's value) and the cosine matrix it predicts for their embeddings. P^s is
a property of the training data (the same for every seed and γ): one run is read.

    python examples/fig_p1_label_dist.py --size quick -o figures
"""
import numpy as np

import probe
from probe.figures import claim, run_script
from probe.chart import heatmap, pyplot

NAME = "p1-label-dist"
TITLE = "Paper 1 Fig. 4B-C: P^s − 1/d_vob of the reasoning anchors and its cosine matrix"


def runs(ctx):
    return ctx.anchor((0.8,))[0.8]


def effect(ctx, path):
    from scipy.stats import spearmanr

    th = probe.theory(path, "reasoning")[0]
    i, j = np.triu_indices(len(th.ids), 1)
    rho = spearmanr(np.abs(th.ids[i] - th.ids[j]), th.predicted[i, j]).statistic
    return [claim("the P^s-predicted cosine of two reasoning anchors falls with |i − j|: Spearman ρ < −0.7",
                  [rho], lambda v: v < -0.7)]


def make(ctx, path):
    theory = probe.theory(path, "reasoning")[0]
    with probe.Run(path) as run:
        ids = run.groups["reasoning"]
        P = np.asarray(run.dataset("label_dist")[ids, :])
    centred = P - 1.0 / P.shape[1]
    labels = np.flatnonzero(np.abs(centred).max(axis=0) > 1.5 / P.shape[1])
    lo, hi = labels.min() - 2, labels.max() + 3
    plt = pyplot()
    fig, (ax, mat) = plt.subplots(1, 2, figsize=(9.5, 3.8), gridspec_kw={"width_ratios": [1.4, 1]},
                                  constrained_layout=True)
    cmap = plt.get_cmap("viridis")
    for k, (s, row) in enumerate(zip(ids, centred)):
        ax.plot(np.arange(lo, hi), row[lo:hi], color=cmap(k / max(1, len(ids) - 1)), label=f"s = {s}")
    ax.set_xlabel("label (token id)")
    ax.set_ylabel("P^s − 1/d_vob")
    ax.set_title("label distribution per reasoning anchor")
    ax.legend(ncol=2, frameon=False, fontsize=7)
    im = heatmap(mat, theory.predicted, ids, ids)
    mat.set_title("cos(P^si − 1/d, P^sj − 1/d)")
    fig.colorbar(im, ax=mat, shrink=0.85, label="cosine similarity")
    fig.suptitle(TITLE)
    return ctx.save(fig, NAME)


if __name__ == "__main__":
    run_script(make)
