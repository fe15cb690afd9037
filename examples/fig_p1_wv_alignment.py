"""Paper 1, Fig. 6D: over training, |cos| between the top singular vector of the first layer's
W^V (in embedding space) and the reasoning vs the memory anchors' embeddings, and the share of W^V's
top singular value, large (γ 0.3) vs small (γ 0.8) initialization, mean and range over seeds.

    python examples/fig_p1_wv_alignment.py --size quick -o figures
"""
import numpy as np

import probe
from probe.figures import claim, run_script
from probe.chart import gamma_color, pyplot, seed_band

NAME = "p1-wv-alignment"
TITLE = "Paper 1 Fig. 6D: alignment of W^V's top singular vector with anchor embeddings (layer 0)"


def runs(ctx):
    return ctx.anchor((0.3, 0.8), seeds=True)


def effect(ctx, runs):
    last = {g: [probe.align(p, layer=0)[0] for p in ps] for g, ps in runs.items()}
    return [claim("γ 0.8: W^V's top direction is closer to the reasoning anchors than to the memory anchors "
                  "(mean |cos| reasoning − memory > 0)",
                  [r.group_mean["reasoning"][0] - r.group_mean["memory"][0] for r in last[0.8]], lambda v: v > 0),
            claim("W^V's top singular value holds a larger share at γ 0.8 than at γ 0.3 (seed-matched difference > 0)",
                  [a.sv1_share - b.sv1_share for a, b in zip(last[0.8], last[0.3])], lambda v: v > 0)]


def make(ctx, runs):
    plt = pyplot()
    fig, (ax, sv) = plt.subplots(1, 2, figsize=(9.5, 3.6), constrained_layout=True)
    for gamma in (0.3, 0.8):
        res = [probe.align(p, layer=0, step="all") for p in runs[gamma]]   # one trajectory per seed
        steps = np.array([r.step for r in res[0]])
        for group, style in (("reasoning", "-"), ("memory", "--")):
            seed_band(ax, steps, [[r.group_mean[group][0] for r in rs] for rs in res], gamma_color(gamma),
                      label=f"γ = {gamma}, {group}", linestyle=style)
        seed_band(sv, steps, [[r.sv1_share for r in rs] for rs in res], gamma_color(gamma), label=f"γ = {gamma}")
    ax.set_xlabel("step")
    ax.set_ylabel("mean |cos(u1, w(s))|")
    ax.set_title("top singular vector vs anchor embeddings")
    ax.legend(frameon=False)
    sv.set_xlabel("step")
    sv.set_ylabel("s1² / Σ s_i²")
    sv.set_title("share of W^V's top singular value")
    sv.legend(frameon=False)
    fig.suptitle(TITLE)
    return ctx.save(fig, NAME)


if __name__ == "__main__":
    run_script(make)
