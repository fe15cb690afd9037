"""Paper 4: ε-saturation. The ε share s = ε / (m + ε) of every norm site over training (m: the mean
square a norm divides by), for large (γ 0.5) and small (γ 1) init with RMSNorm ε 1e-5 and 1e-12.
A small-init model's activations are tiny, so ε = 1e-5 is no longer negligible next to them.

    python examples/fig_p4_saturation.py --size quick -o figures
"""
import probe
from probe.figures import run_script
from probe.plotting import pyplot, saturation_map

NAME = "p4-saturation"
TITLE = "Paper 4: ε share of every norm site over training (γ × ε)"
GAMMAS, EPS = (0.5, 1.0), (1e-5, 1e-12)


def make(ctx):
    runs = ctx.llm(GAMMAS, EPS)
    plt = pyplot()
    fig, axes = plt.subplots(len(GAMMAS), len(EPS), figsize=(11, 5.2), constrained_layout=True, squeeze=False)
    for i, g in enumerate(GAMMAS):
        for j, e in enumerate(EPS):
            res = probe.norms(runs[g, e, False], step="all")
            im = saturation_map(res, None, "", ax=axes[i][j])
            peak = max(r.eps_share.max() for r in res)
            axes[i][j].set_title(f"γ {g}, ε {e:g}: max s {peak:.3f}", fontsize=9)
            axes[i][j].tick_params(axis="x", labelsize=5)
    fig.colorbar(im, ax=axes, shrink=0.8, label="ε share s = ε / (m + ε) (log; below 1e-4 shown as 1e-4)")
    fig.suptitle(TITLE)
    return ctx.save(fig, NAME)


if __name__ == "__main__":
    run_script(make)
