"""Paper 2, Fig. 13: singular values of every linear layer at the last step, small vs large
initialization: few large singular values (low complexity) at small initialization. The spectra are
seed 0; the effect is checked in every seed.

    python examples/fig_p2_singular_values.py --size quick -o figures
"""
import numpy as np

import probe
from probe.figures import claim, run_script
from probe.chart import gamma_color, pyplot

NAME = "p2-singular-values"
TITLE = "Paper 2 Fig. 13: singular values of every layer at the last step (composite task, 2 layers)"


def runs(ctx):
    return ctx.composite((0.3, 0.8), (2,), seeds=True)


def top_energy(r) -> float:
    """Mean over the layers' matrices of s1² / Σ s_i²: near 1 when one direction dominates."""
    shares = []
    for sv in r.layer_singular_values.values():
        s2 = np.sort(np.ravel(sv))[::-1] ** 2
        shares.append(s2[0] / s2.sum())
    return float(np.mean(shares))


def effect(ctx, runs):
    e = {g: [top_energy(probe.condense(p, neurons=None)[0]) for p in runs[g, 2]] for g in (0.3, 0.8)}
    return [claim("fewer large singular values at small init: mean s1² / Σ s² over the layers larger at γ 0.8 "
                  "than at γ 0.3 (seed-matched difference > 0)",
                  [a - b for a, b in zip(e[0.8], e[0.3])], lambda v: v > 0)]


def make(ctx, runs):
    res = {g: probe.condense(runs[g, 2][0], neurons=None)[0] for g in (0.3, 0.8)}
    names = list(res[0.8].layer_singular_values)
    cols = 4
    rows = (len(names) + cols - 1) // cols
    plt = pyplot()
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 2.5 * rows), squeeze=False)
    # fixed margins: constrained layout measured every log tick label of 16 panels (10 s of 12 per figure)
    fig.subplots_adjust(left=0.07, right=0.98, bottom=0.06, top=1 - 0.8 / (2.5 * rows), wspace=0.4,
                        hspace=0.75)
    for ax, name in zip(axes.flat, names):
        for g, r in res.items():
            sv = np.sort(np.ravel(r.layer_singular_values[name]))[::-1]
            ax.plot(np.arange(1, len(sv) + 1), sv / sv[0], ".-", ms=3, color=gamma_color(g), label=f"γ = {g}")
        ax.set_yscale("log")
        ax.set_title(name, fontsize=8)
        ax.set_xlabel("index")
        ax.set_ylabel("s_i / s_1")
    for ax in list(axes.flat)[len(names):]:
        ax.axis("off")
    axes[0, 0].legend(frameon=False)
    fig.suptitle(TITLE)
    return ctx.save(fig, NAME)


if __name__ == "__main__":
    run_script(make)
