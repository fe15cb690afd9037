"""Paper 4: condensation (the paper's "condense, then expand"; the figure checks the dip). The
effective rank of the weight matrices (mean over every matrix of every layer) and of the centred
token embedding against the log step, for γ 0.5 and 1, with a band over seeds; the dots mark where
each seed's trajectory bottoms out.

    python examples/fig_p4_rank.py --size quick -o figures [--seeds 3]
"""
import numpy as np

import probe
from probe.figures import claim, run_script
from probe.chart import gamma_color, pyplot, seed_band

NAME = "p4-rank"
TITLE = "Paper 4: effective rank over training, and its condensing dip"
GAMMAS = (0.5, 1.0)


def runs(ctx):
    return ctx.llm(GAMMAS, seeds=True)


def weight_rank(path) -> tuple[np.ndarray, np.ndarray]:
    """(steps, effective rank averaged over every weight matrix of every layer) over training."""
    res = probe.rank(path, step="all")
    names = [n for n in res[0].names if n.startswith("layer")]
    return (np.array([r.step for r in res], dtype=float),
            np.array([np.mean([r.numbers[n]["effective_rank"] for n in names]) for r in res]))


def dip(path) -> float:
    """Minimum over training / the value at step 0 of the mean weight effective rank."""
    _, w = weight_rank(path)
    return float(w.min() / w[0])


def effect(ctx, runs):
    small, large = [dip(p) for p in runs[1.0, 1e-5, False]], [dip(p) for p in runs[0.5, 1e-5, False]]
    return [claim("small init condenses: the weights' mean effective rank dips by ≥ 5 % at γ 1 (minimum / start "
                  "< 0.95)", small, lambda v: v < 0.95),
            claim("deeper than at γ 0.5 (seed-matched dip γ 0.5 − γ 1 > 0)", [b - a for a, b in zip(small, large)],
                  lambda v: v > 0)]


def make(ctx, runs):
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8), constrained_layout=True)
    for g in GAMMAS:
        curves = {"weights": [], "embedding": []}
        for path in runs[g, 1e-5, False]:
            res = probe.rank(path, step="all")
            steps = np.array([r.step for r in res], dtype=float)
            names = [n for n in res[0].names if n.startswith("layer")]
            w = np.array([np.mean([r.numbers[n]["effective_rank"] for n in names]) for r in res])
            e = np.array([r.numbers["embedding"]["effective_rank"] for r in res])
            for ax, key, y in ((axes[0], "weights", w), (axes[1], "embedding", e)):
                curves[key].append(y)
                i = int(np.argmin(y))
                ax.plot(steps[i], y[i], "o", color=gamma_color(g), ms=4)
        for ax, key in ((axes[0], "weights"), (axes[1], "embedding")):
            seed_band(ax, steps, curves[key], gamma_color(g), label=f"γ {g}")
    axes[0].set_ylabel("effective rank, mean over weight matrices")
    axes[1].set_ylabel("effective rank of the token embedding")
    for ax in axes:
        ax.set_xlabel("step")
        ax.set_xscale("symlog", linthresh=1)
        ax.legend(frameon=False, fontsize=7)
    fig.suptitle(ctx.title(TITLE, text=True))
    return ctx.save(fig, NAME)


if __name__ == "__main__":
    run_script(make)
