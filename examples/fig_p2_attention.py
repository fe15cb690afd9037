"""Paper 2, attention information flow: the mean attention map of each layer on the stored probe
sequences (aligned on the key position), large (γ 0.5; 0.3 at the CPU sizes) vs small (γ 0.8)
initialization. At small initialization the first layer starts by averaging (uniform attention over
the earlier positions); where the key and the two anchors flow decides the solution. The maps are
seed 0 early in training and at the last step; the effect is checked in every seed.

    python examples/fig_p2_attention.py --size quick -o figures
"""
import probe
from probe.figures import claim, run_script
from probe.chart import heatmap, pyplot

NAME = "p2-attention"
TITLE = "Paper 2: attention per layer on the composite task (mean over probe sequences)"


def large(ctx) -> float:
    """The large init shown beside γ 0.8: the paper's γ 0.5, or γ 0.3 at the CPU sizes (whose composite
    runs are γ 0.3 and 0.8: p2-ood)."""
    return 0.3 if ctx.quick else 0.5


def runs(ctx):
    return ctx.composite((large(ctx), 0.8), (2,), seeds=True)


def early(path) -> int:
    """The first snapshot at or after a sixth of training (step 200 of 1200)."""
    with probe.Run(path) as run:
        steps = [int(s) for s in run.steps]
    return next(s for s in steps if s >= steps[-1] / 6)


def effect(ctx, runs):
    g0 = large(ctx)
    dev = {g: [probe.attention(p, step=early(p))[0].avg_dev[0].mean() for p in runs[g, 2]] for g in (g0, 0.8)}
    return [claim("small init starts by averaging: early in training (a sixth of the way) the first layer's "
                  "|A − 1/i| is below 0.02 at γ 0.8", dev[0.8], lambda v: v < 0.02),
            claim(f"large init does not: above 0.05 at γ {g0} at the same step", dev[g0], lambda v: v > 0.05)]


def make(ctx, runs):
    g0 = large(ctx)
    step = early(runs[0.8, 2][0])
    res = {(g, s): probe.attention(runs[g, 2][0], step=s)[0] for g in (g0, 0.8) for s in (step, "latest")}
    layers = res[0.8, step].mean_map.shape[0]
    plt = pyplot()
    # one row per γ; per row the layers early in training, then the layers at the last step
    fig, axes = plt.subplots(2, 2 * layers, figsize=(3.3 * 2 * layers + 0.8, 6.6), squeeze=False,
                             constrained_layout=True)
    im = None
    for row, g in enumerate((g0, 0.8)):
        for half, s in enumerate((step, "latest")):
            r = res[g, s]
            T = r.mean_map.shape[-1]
            k = r.map_key_pos
            names = ["x" if i == k else "a1" if i == k + 1 else "a2" if i == k + 2 else "" for i in range(T)]
            for layer in range(layers):
                ax = axes[row, half * layers + layer]
                im = heatmap(ax, r.mean_map[layer].mean(0), [f"{i}{n and ' ' + n}" for i, n in enumerate(names)],
                             range(T), vmin=0, vmax=1, cmap="Blues")
                ax.set_title(f"γ = {g}, step {r.step}, layer {layer}\n|A − 1/i| = {r.avg_dev[layer].mean():.3f}",
                             fontsize=9)
                ax.set_xlabel("key position (x = key, a1 a2 = anchors)")
                ax.set_ylabel("query position")
    fig.colorbar(im, ax=axes, shrink=0.8, label="attention probability")
    fig.suptitle(f"{TITLE}; seed 0, early (step {step}) and last step")
    return ctx.save(fig, NAME)


if __name__ == "__main__":
    run_script(make)
