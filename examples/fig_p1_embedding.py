"""Paper 1, Fig. 5A-D: the transformer's embeddings at small (γ = 0.8) and large (γ = 0.3)
initialization: cosine matrix of keys and reasoning anchors, PCA, and the theory: measured
cos(w(s0), w(s_j)) against the eq. 14 reconstruction, and measured against P^s-predicted cosines.
The panels are seed 0; the effect is checked in every seed.

    python examples/fig_p1_embedding.py --size quick -o figures
"""
import numpy as np

import probe
from probe.figures import claim, run_script
from probe.chart import GROUP_COLORS, gamma_color, heatmap, pyplot

NAME = "p1-embedding"
TITLE = "Paper 1 Fig. 5: embedding structure and the P^s theory, γ = 0.8 (top) vs γ = 0.3 (bottom)"


def runs(ctx):
    return ctx.anchor((0.3, 0.8), seeds=True)


def effect(ctx, runs):
    order = {g: [probe.pca(p, "keys,reasoning,memory")[0].order_pc1["reasoning"] for p in ps] for g, ps in runs.items()}
    r = {g: [probe.theory(p, "reasoning")[0].pearson_r for p in ps] for g, ps in runs.items()}
    return [claim("γ 0.8: PC1 orders the reasoning anchors (|Spearman ρ| of PC1 with value > 0.9)", order[0.8],
                  lambda v: v > 0.9),
            claim("γ 0.3: it does not (< 0.9)", order[0.3], lambda v: v < 0.9),
            claim("γ 0.8: the P^s theory predicts the measured cosines (Pearson r > 0.8)", r[0.8], lambda v: v > 0.8),
            claim("γ 0.3: it does not (r < 0.8)", r[0.3], lambda v: v < 0.8)]


def make(ctx, runs):
    runs = {g: paths[0] for g, paths in runs.items()}
    plt = pyplot()
    fig, axes = plt.subplots(2, 4, figsize=(15, 7.2), constrained_layout=True)
    for row, gamma in enumerate((0.8, 0.3)):
        path = runs[gamma]
        sim = probe.similarity(path, "reasoning,keys")[0]
        pca = probe.pca(path, "keys,reasoning,memory")[0]
        th = probe.theory(path, "reasoning")[0]
        a, b, c, d = axes[row]
        im = heatmap(a, sim.matrix)
        a.set_title(f"A  cosine: reasoning anchors + keys (γ = {gamma})")
        a.set_xlabel("token index (reasoning, then keys)")
        fig.colorbar(im, ax=a, shrink=0.8)
        for g in ("keys", "reasoning", "memory"):
            m = np.array([x == g for x in pca.groups])
            b.scatter(pca.coords[m, 0], pca.coords[m, 1], s=14, color=GROUP_COLORS[g], label=g)
            if g != "keys":
                for t, xy in zip(pca.ids[m], pca.coords[m]):
                    b.annotate(str(t), xy[:2], fontsize=6)
        b.set_xlabel(f"PC1 ({100 * pca.explained[0]:.0f}%)")
        b.set_ylabel(f"PC2 ({100 * pca.explained[1]:.0f}%)")
        b.set_title(f"B  PCA, reasoning order {pca.order_pc1.get('reasoning', float('nan')):.2f}")
        b.legend(frameon=False)
        c.plot(th.ids, th.profile_measured, "o-", color=gamma_color(gamma), label="measured")
        c.plot(th.ids, th.profile_reconstructed, "s--", color="k", label="eq. 14 reconstruction")
        c.set_xlabel("reasoning anchor s_j")
        c.set_ylabel(f"cos(w({th.anchor}), w(s_j))")
        c.set_title(f"C  theory profile, r = {th.profile_r:.2f}")
        c.legend(frameon=False)
        off = ~np.eye(len(th.ids), dtype=bool)
        d.scatter(th.predicted[off], th.measured[off], s=8, color=gamma_color(gamma))
        d.plot([-1, 1], [-1, 1], "k:", lw=1)
        d.set_xlabel("predicted cos(P^si − 1/d, P^sj − 1/d)")
        d.set_ylabel("measured embedding cosine")
        d.set_title(f"D  theory vs measured, r = {th.pearson_r:.2f}")
    fig.suptitle(TITLE)
    return ctx.save(fig, NAME)


if __name__ == "__main__":
    run_script(make)
