"""Paper 2: where along γ the answer on the unseen pair (4,3) turns from symmetric to inferential
(or back): inferential − symmetric accuracy per seed on a fine γ grid at 2 layers, the mean with
its 95 % interval, and the crossing γ* of the mean with a bootstrap interval over seeds.

    python examples/fig_p2_transition.py --size quick -o figures [--seeds 3]
"""
import numpy as np

import probe
from probe.analyses.uncertainty import crossing
from probe.figures import claim, run_script
from probe.chart import points_with_ci, pyplot

NAME = "p2-transition"
TITLE = "Paper 2: the transition γ* between the symmetric and the inferential solution (2 layers)"
CAVEAT = ("at CPU size a coarse grid (the runs of p2-ood) and no crossing of the paper's kind; the fine grid "
          "needs composite-paper (a GPU, not run here)")


def gammas(ctx) -> tuple[float, ...]:
    return (0.3, 0.8) if ctx.quick else (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)


def runs(ctx):
    return ctx.composite(gammas(ctx), (2,), seeds=True)


def _diff(path) -> float:
    m = probe.info(path)["metrics"]
    return m["ood_inferential"]["acc"] - m["ood_symmetric"]["acc"]


def effect(ctx, runs):
    G = gammas(ctx)
    if ctx.quick:
        return [claim("at the largest init (γ 0.3) the answer is symmetric: inferential − symmetric < 0",
                      [_diff(p) for p in runs[G[0], 2]], lambda v: v < 0)]
    cross = crossing(G, [[_diff(p) for p in runs[g, 2]] for g in G])
    return [claim("the mean inferential − symmetric crosses 0 from below on the γ grid (share of bootstrap "
                  "resamples with a crossing > 0.95)", [cross["found"]], lambda v: v > 0.95)]


def make(ctx, runs):
    GAMMAS = gammas(ctx)
    diff = [[_diff(p) for p in runs[g, 2]] for g in GAMMAS]
    cross = crossing(GAMMAS, diff)
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 3.8), constrained_layout=True)
    points_with_ci(ax, GAMMAS, diff, "#1f77b4", label="inferential − symmetric")
    ax.axhline(0, color="grey", lw=0.8)
    if np.isfinite(cross["x"]):
        ax.axvline(cross["x"], color="k", ls="--", lw=1,
                   label=f"γ* = {cross['x']:.2f} [{cross['ci_lo']:.2f}, {cross['ci_hi']:.2f}]"
                         f" (crossing in {100 * cross['found']:.0f}% of resamples)")
        if np.isfinite(cross["ci_lo"]):
            ax.axvspan(cross["ci_lo"], cross["ci_hi"], color="k", alpha=0.08)
    else:
        ax.set_title("the mean does not cross 0 on this grid", fontsize=8)
    ax.set_xlabel("initialization rate γ (larger = smaller init)")
    ax.set_ylabel("accuracy difference on (4,3)")
    ax.set_ylim(-1.05, 1.05)
    ax.legend(frameon=False, fontsize=7)
    fig.suptitle(ctx.title(TITLE, CAVEAT))
    return ctx.save(fig, NAME)


if __name__ == "__main__":
    run_script(make)
