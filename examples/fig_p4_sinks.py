"""Paper 4: attention sinks with and without a gated attention output. Mean attention of the later
queries on the first position (per layer, over heads) and the first position's residual norm over
the median position's, over training, for γ 0.5 and 1, the gate off and on (at the CPU sizes the gate
only at γ 1).

    python examples/fig_p4_sinks.py --size quick -o figures
"""
import numpy as np

import probe
from probe.figures import claim, run_script
from probe.chart import gamma_color, pyplot

NAME = "p4-sinks"
TITLE = "Paper 4: attention-sink mass and first-position norm, with and without the attention gate"
CAVEAT = ("at CPU size (2 layers, short windows) no sink forms and the gate changes nothing; sinks need depth "
          "and context (llm-gpu, a GPU, not run here)")
GAMMAS, GATED = (0.5, 1.0), (False, True)


def runs(ctx):
    # at the CPU sizes, where no sink forms, the gate only at small init (one run less)
    return {**ctx.llm(GAMMAS, (1e-5,)), **ctx.llm((1.0,) if ctx.quick else GAMMAS, (1e-5,), (True,))}


def effect(ctx, runs):
    if not ctx.quick:
        return []
    mass = [float(probe.sinks(p)[0].sink_mass.max()) for p in runs.values()]
    return [claim("no attention sink at CPU size: no head's mass on position 0 reaches 0.3 (any γ, gate)", mass,
                  lambda v: v < 0.3)]


def make(ctx, runs):
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8), constrained_layout=True)
    for g in GAMMAS:
        for gate in GATED:
            if (g, 1e-5, gate) not in runs:
                continue
            res = probe.sinks(runs[g, 1e-5, gate], step="all")
            steps = np.array([r.step for r in res], dtype=float)
            ls = "--" if gate else "-"
            label = f"γ {g}" + (", gated" if gate else "")
            axes[0].plot(steps, [r.sink_mass.mean() for r in res], ls, color=gamma_color(g), label=label)
            if res[0].first_norm_ratio is not None:
                axes[1].plot(steps, [r.first_norm_ratio[-1] for r in res], ls, color=gamma_color(g), label=label)
    axes[0].plot(steps, [r.uniform_mass for r in res], ":", color="grey", label="causal averaging")
    axes[0].set_ylabel("attention on position 0 (mean over layers, heads)")
    axes[1].set_ylabel("‖h_0‖ / median ‖h_i‖ (last block's output)")
    for ax in axes:
        ax.set_xlabel("step")
        ax.set_xscale("symlog", linthresh=10)
        ax.legend(frameon=False, fontsize=7)
    fig.suptitle(ctx.title(TITLE, CAVEAT, text=True))
    return ctx.save(fig, NAME)


if __name__ == "__main__":
    run_script(make)
