"""Paper 4: ε-saturation. The ε share s = ε / (m + ε) of every norm site over training (m: the mean
square a norm divides by), for large (γ 0.5) and small (γ 1) init with RMSNorm ε 1e-5 and 1e-12 (at
the CPU sizes γ 0.5 only with ε 1e-5: its share is ~0 already).
A small-init model's activations are tiny, so ε = 1e-5 is no longer negligible next to them.

    python examples/fig_p4_saturation.py --size quick -o figures
"""
import probe
from probe import registry
from probe.chart import draw, pyplot
from probe.figures import claim, run_script

NAME = "p4-saturation"
TITLE = "Paper 4: ε share of every norm site over training (γ × ε)"
GAMMAS, EPS = (0.5, 1.0), (1e-5, 1e-12)


def runs(ctx):
    runs = ctx.llm(GAMMAS, (1e-5,))
    # ε 1e-12 at small init; at the paper's size at large init too (at the CPU sizes its share stays ~0,
    # as with ε 1e-5 there: one run less)
    return {**runs, **ctx.llm(GAMMAS if not ctx.quick else (1.0,), (1e-12,))}


def peak(path) -> float:
    """The largest ε share of any norm site at any snapshot."""
    return max(float(r.eps_share.max()) for r in probe.norms(path, step="all"))


def effect(ctx, runs):
    return [claim("small init with ε 1e-5 saturates: max ε share ≥ 0.1 at γ 1", [peak(runs[1.0, 1e-5, False])],
                  lambda v: v >= 0.1),
            claim("not with ε 1e-12 (max share < 1e-3)", [peak(runs[1.0, 1e-12, False])], lambda v: v < 1e-3),
            claim("nor at large init (γ 0.5, ε 1e-5: max share < 0.01)", [peak(runs[0.5, 1e-5, False])],
                  lambda v: v < 0.01)]


def make(ctx, runs):
    plt = pyplot()
    fig, axes = plt.subplots(len(GAMMAS), len(EPS), figsize=(11, 5.2), constrained_layout=True, squeeze=False)
    for i, g in enumerate(GAMMAS):
        for j, e in enumerate(EPS):
            if (g, e, False) not in runs:   # γ 0.5 with ε 1e-12 at the CPU sizes: not trained
                axes[i][j].axis("off")
                axes[i][j].text(0.5, 0.5, f"γ {g}, ε {e:g}: not trained at this size\n(as ε 1e-5: s ≈ 0)",
                                ha="center", va="center", fontsize=8, transform=axes[i][j].transAxes)
                continue
            res = probe.norms(runs[g, e, False], step="all")
            im = draw(axes[i][j], *registry.get("norms").charts(res))   # the map of probe norms --step all --plot
            peak = max(r.eps_share.max() for r in res)
            axes[i][j].set_title(f"γ {g}, ε {e:g}: max s {peak:.3f}", fontsize=9)
            axes[i][j].tick_params(axis="x", labelsize=5)
    fig.colorbar(im, ax=axes, shrink=0.8, label="ε share s = ε / (m + ε) (log; below 1e-4 shown as 1e-4)")
    fig.suptitle(ctx.title(TITLE, text=True))
    return ctx.save(fig, NAME)


if __name__ == "__main__":
    run_script(make)
