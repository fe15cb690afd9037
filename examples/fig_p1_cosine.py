"""Paper 1, Fig. 4A: cosine similarity of memory-anchor and reasoning-anchor embeddings at an
early and the last step (small initialization, γ = 0.8): reasoning anchors form a band ordered
by value, memory anchors move together early (shown at the step where they are most alike) and lose
their shared direction later. The heat maps are seed 0; the title gives ρ(|i − j|, cos) of the
reasoning anchors in every seed.

    python examples/fig_p1_cosine.py --size quick -o figures
"""
import probe
from probe.figures import claim, run_script
from probe.chart import heatmap, pyplot

NAME = "p1-cosine"
TITLE = "Paper 1 Fig. 4A: embedding cosine similarity, memory vs reasoning anchors (γ = 0.8)"


def runs(ctx):
    return ctx.anchor((0.8,), seeds=True)[0.8]


def _rho(path) -> float:
    return probe.similarity(path, "reasoning")[0].distance_corr


def _early(path) -> tuple[int, int]:
    """(the step where the memory anchors are most alike, the last step)."""
    res = probe.similarity(path, "memory", step="all")
    return max(res, key=lambda r: r.mean_offdiag).step, res[-1].step


def effect(ctx, runs):
    drop = []
    for p in runs:
        res = probe.similarity(p, "memory", step="all")
        peak = max(res, key=lambda r: r.mean_offdiag)
        drop.append((peak.mean_offdiag - res[-1].mean_offdiag) / peak.mean_offdiag if peak is not res[-1] else 0.0)
    return [claim("γ 0.8's reasoning anchors form a band: ρ(|i−j|, cos) < −0.7 at the last step",
                  [_rho(p) for p in runs], lambda v: v < -0.7),
            claim("its memory anchors move together early, then apart: their mean cosine peaks before the last "
                  "step and falls from the peak by ≥ 10 % (fall / peak)", drop, lambda v: v >= 0.1)]


def make(ctx, runs):
    path = runs[0]
    early, last = _early(path)
    plt = pyplot()
    fig, axes = plt.subplots(2, 2, figsize=(7.4, 6.6), constrained_layout=True)
    im = None
    for row, group in enumerate(("memory", "reasoning")):
        for col, step in enumerate((early, last)):
            r = probe.similarity(path, group, step=step)[0]
            ax = axes[row, col]
            im = heatmap(ax, r.matrix, r.ids, r.ids)
            ax.set_title(f"{group} anchors, step {step}\nmean {r.mean_offdiag:.2f}, ρ(|i−j|) {r.distance_corr:.2f}")
            ax.set_xlabel("token")
            ax.set_ylabel("token")
    fig.colorbar(im, ax=axes, shrink=0.8, label="cosine similarity")
    rhos = ", ".join(f"{_rho(p):.2f}" for p in runs)
    fig.suptitle(f"{TITLE}\nreasoning anchors' ρ(|i−j|, cos) at the last step, seeds 0-{len(runs) - 1}: {rhos}")
    return ctx.save(fig, NAME)


if __name__ == "__main__":
    run_script(make)
