"""Paper 2, Fig. 12b: eigenvalues of the covariance of the token embeddings during training. At
small initialization a few eigenvalues dominate, the top one growing first and the rest later. The
curves are seed 0; the effect is checked in every seed.

    python examples/fig_p2_condensation.py --size quick -o figures
"""
import numpy as np

import probe
from probe.figures import claim, run_script
from probe.chart import gamma_color, pyplot

NAME = "p2-condensation"
TITLE = "Paper 2 Fig. 12b: covariance eigenvalues of the embeddings over training (composite task)"
TOP = 6


def runs(ctx):
    return ctx.composite((0.3, 0.8), (2,), seeds=True)


def effect(ctx, runs):
    last = {g: [probe.condense(p, tokens="keys", neurons=None)[0] for p in runs[g, 2]] for g in (0.3, 0.8)}
    return [claim("the key embeddings condense at small init: λ1 / Σλ larger at γ 0.8 than at γ 0.3 at the last "
                  "step (seed-matched difference > 0)",
                  [a.top_share[1] - b.top_share[1] for a, b in zip(last[0.8], last[0.3])], lambda v: v > 0),
            claim("and their covariance's effective rank is at most half of γ 0.3's (ratio γ 0.8 / γ 0.3 < 0.5)",
                  [a.effective_rank / b.effective_rank for a, b in zip(last[0.8], last[0.3])], lambda v: v < 0.5)]


def make(ctx, runs):
    runs = {k: paths[0] for k, paths in runs.items()}
    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6), constrained_layout=True)
    cmap = plt.get_cmap("plasma")
    for ax, gamma in zip(axes[:2], (0.8, 0.3)):
        res = probe.condense(runs[gamma, 2], tokens="keys", neurons=None, step="all")
        steps = np.array([r.step for r in res])
        ev = np.array([r.eigenvalues[:TOP] for r in res])
        for k in range(ev.shape[1]):
            ax.plot(steps, ev[:, k], color=cmap(k / TOP), label=f"λ{k + 1}")
        ax.set_yscale("log")
        ax.set_xlabel("step")
        ax.set_ylabel("eigenvalue of the key-embedding covariance")
        ax.set_title(f"γ = {gamma} (2 layers)")
        ax.legend(frameon=False, ncol=2)
        share = axes[2]
        share.plot(steps, [r.top_share[1] for r in res], color=gamma_color(gamma), label=f"γ = {gamma}")
    axes[2].set_xlabel("step")
    axes[2].set_ylabel("λ1 / Σ λ")
    axes[2].set_ylim(0, 1.02)
    axes[2].set_title("share of the top eigenvalue")
    axes[2].legend(frameon=False)
    fig.suptitle(TITLE)
    return ctx.save(fig, NAME)


if __name__ == "__main__":
    run_script(make)
