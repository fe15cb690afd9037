"""Paper 2, attention information flow: the mean attention map of each layer on the stored probe
sequences (aligned on the key position), large vs small initialization. At small initialization the
first layer averages; where the key and the two anchors flow decides the solution.

    python examples/fig_p2_attention.py --size quick -o figures
"""
import probe
from probe.figures import run_script
from probe.plotting import heatmap, pyplot

NAME = "p2-attention"
TITLE = "Paper 2: attention per layer on the composite task (mean over probe sequences)"


def make(ctx):
    runs = ctx.composite((0.5, 0.8), (2,))   # only what it draws
    res = {g: probe.attention(runs[g, 2])[0] for g in (0.5, 0.8)}
    layers = res[0.8].mean_map.shape[0]
    plt = pyplot()
    fig, axes = plt.subplots(2, layers, figsize=(3.6 * layers + 0.8, 6.6), squeeze=False, constrained_layout=True)
    im = None
    for row, (g, r) in enumerate(res.items()):
        T = r.mean_map.shape[-1]
        k = r.map_key_pos
        names = ["x" if i == k else "a1" if i == k + 1 else "a2" if i == k + 2 else "" for i in range(T)]
        for layer in range(layers):
            ax = axes[row, layer]
            im = heatmap(ax, r.mean_map[layer].mean(0), [f"{i}{n and ' ' + n}" for i, n in enumerate(names)],
                         range(T), vmin=0, vmax=1, cmap="Blues")
            ax.set_title(f"γ = {g}, layer {layer}: |A − 1/i| = {r.avg_dev[layer].mean():.2f}")
            ax.set_xlabel("key position (x = key, a1 a2 = anchors)")
            ax.set_ylabel("query position")
    fig.colorbar(im, ax=axes, shrink=0.8, label="attention probability")
    fig.suptitle(TITLE)
    return ctx.save(fig, NAME)


if __name__ == "__main__":
    run_script(make)
