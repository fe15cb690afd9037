"""Paper 4: the critical γ. Over a γ grid and RMSNorm ε ∈ {1e-5, 1e-12} (ε 1e-5 at the CPU sizes): the final validation loss
(mean of the logic and story losses) and the logic (reasoning) loss, paper 1's ΔL, and the escape
step (first step where the smoothed training loss is below ln V − 0.5); means over seeds with 95 %
intervals. γ* is the γ with the lowest mean validation loss, with its bootstrap interval over seeds:
past it, the reasoning gain of a smaller init no longer pays for its slower training.

    python examples/fig_p4_critical.py --size quick -o figures [--seeds 3]
"""
import numpy as np

import probe
from probe.analyses.uncertainty import argmin_x
from probe.figures import claim, run_script
from probe.chart import points_with_ci, pyplot

NAME = "p4-critical"
TITLE = "Paper 4: the critical γ between reasoning gain and training cost"
COLORS = {1e-5: "#d62728", 1e-12: "#1f77b4"}


def gammas(ctx):
    return {"tiny": (0.5, 1.0), "quick": (0.5, 0.75, 1.0), "full": (0.5, 0.75, 1.0, 1.25)}[ctx.size]


def epsilons(ctx):
    """RMSNorm ε: both at the paper's size; at the CPU sizes ε 1e-5 (p4-saturation compares the two)."""
    return (1e-5,) if ctx.quick else (1e-5, 1e-12)


def runs(ctx):
    return ctx.llm(gammas(ctx), epsilons(ctx), seeds=True)


def effect(ctx, runs):
    G = gammas(ctx)
    per = {g: [numbers(p) for p in runs[g, 1e-5, False]] for g in G}
    seeds = range(len(per[G[0]]))
    best = [G[int(np.argmin([per[g][s]["val"] for g in G]))] for s in seeds]
    return [claim(f"a critical γ: each seed's lowest validation loss (ε 1e-5) is at an inner γ of {G} (the γ shown)",
                  best, lambda v: G[0] < v < G[-1]),
            claim(f"training cost grows with γ: the escape step is later at γ {G[-1]:g} than at γ {G[0]:g} "
                  "(seed-matched difference > 0)",
                  [per[G[-1]][s]["escape"] - per[G[0]][s]["escape"] for s in seeds], lambda v: v > 0)]


def numbers(path) -> dict:
    m = probe.info(path)["metrics"]
    d = probe.dynamics(path)[0]
    return {"val": (m["logic"]["loss"] + m["story"]["loss"]) / 2, "logic": m["logic"]["loss"],
            "delta": probe.bias(path)[0].delta_L, "escape": d.escape_step if d.escape_step is not None else np.nan}


def make(ctx, runs):
    G, EPS = gammas(ctx), epsilons(ctx)
    plt = pyplot()
    fig, axes = plt.subplots(1, 4, figsize=(15, 3.6), constrained_layout=True)
    panels = (("val", "final validation loss"), ("logic", "logic (reasoning) loss"), ("delta", "ΔL (story − logic) / logic"),
              ("escape", "escape step"))
    for e in EPS:
        per = {g: [numbers(p) for p in runs[g, e, False]] for g in G}
        for ax, (key, label) in zip(axes, panels):
            points_with_ci(ax, G, [[n[key] for n in per[g]] for g in G], COLORS[e], label=f"ε {e:g}")
            ax.set_ylabel(label)
        star = argmin_x(G, [[n["val"] for n in per[g]] for g in G])
        axes[0].axvline(star["x"], color=COLORS[e], ls="--", lw=1,
                        label=f"γ* {star['x']:g} [{star['ci_lo']:g}, {star['ci_hi']:g}], ε {e:g}")
    for ax in axes:
        ax.set_xlabel("γ (larger = smaller init)")
    axes[0].legend(frameon=False, fontsize=6)
    fig.suptitle(ctx.title(TITLE, text=True))
    return ctx.save(fig, NAME)


if __name__ == "__main__":
    run_script(make)
