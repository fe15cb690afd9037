"""Paper 4: where the gain of small init lands. Per-token loss of γ 1 against γ 0.5 on the same
held-out tokens at the last step, cut into quartiles of each token feature: each quartile's share of
the total gain next to its share of the tokens (a gain spread evenly would match them), and by source.

    python examples/fig_p4_tokens.py --size quick -o figures
"""
import numpy as np

import probe
from probe.figures import run_script
from probe.plotting import pyplot

NAME = "p4-tokens"
TITLE = "Paper 4: the per-token gain of γ 1 over γ 0.5, by token feature"
FEATURES = {"frequency": "token frequency", "bigram": "bigram surprisal", "context_benefit": "context benefit",
            "entropy": "predictive entropy"}


def make(ctx):
    runs = ctx.llm((0.5, 1.0))
    r = probe.tokens(runs[1.0, 1e-5, False], runs[0.5, 1e-5, False])[0]
    plt = pyplot()
    fig, axes = plt.subplots(1, len(FEATURES) + 1, figsize=(14, 3.4), constrained_layout=True)
    for ax, (f, label) in zip(axes, FEATURES.items()):
        bs = r.buckets[f]
        x = np.arange(len(bs))
        ax.bar(x - 0.2, [b["gain_share"] for b in bs], 0.4, label="share of the gain")
        ax.bar(x + 0.2, [b["token_share"] for b in bs], 0.4, color="lightgrey", label="share of the tokens")
        ax.set_xticks(x, [f"q{b['bucket']}" for b in bs])
        ax.set_xlabel(f"{label} (q1 lowest)")
    axes[0].set_ylabel("share")
    axes[0].legend(frameon=False, fontsize=7)
    groups = list(r.groups)
    axes[-1].bar(groups, [r.groups[g]["mean_delta"] for g in groups], color=["#1f77b4", "#ff7f0e"][:len(groups)])
    axes[-1].axhline(0, color="grey", lw=0.8)
    axes[-1].set_ylabel("mean ΔL = L(γ 1) − L(γ 0.5) (nats)")
    axes[-1].set_title("by source", fontsize=9)
    fig.suptitle(f"{TITLE}: mean ΔL {r.mean_delta:+.3f} nats over {r.n} tokens")
    return ctx.save(fig, NAME)


if __name__ == "__main__":
    run_script(make)
