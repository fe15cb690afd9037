"""Paper 2, Fig. 13: singular values of every linear layer at the last step, small vs large
initialization: few large singular values (low complexity) at small initialization.

    python examples/fig_p2_singular_values.py --size quick -o figures
"""
import numpy as np

import probe
from probe.figures import run_script
from probe.plotting import gamma_color, pyplot

NAME = "p2-singular-values"
TITLE = "Paper 2 Fig. 13: singular values of every layer at the last step (composite task, 2 layers)"


def make(ctx):
    runs = ctx.composite((0.3, 0.8), (2,))   # only what it draws
    res = {g: probe.condense(runs[g, 2], neurons=None)[0] for g in (0.3, 0.8)}
    names = list(res[0.8].layer_singular_values)
    cols = 4
    rows = (len(names) + cols - 1) // cols
    plt = pyplot()
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 2.5 * rows), squeeze=False, constrained_layout=True)
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
