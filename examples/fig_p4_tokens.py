"""Paper 4: where the gain of small init lands. Per-token loss of a small init (γ 1 at the paper's size,
γ 0.75 at the CPU sizes) against γ 0.5 on the same held-out tokens at the last step, cut into quartiles
of each token feature: each quartile's share of the total gain next to its share of the tokens (a gain
spread evenly would match them), and by source. The bars are seed 0; the effect is checked in every
seed pair.

    python examples/fig_p4_tokens.py --size quick -o figures
"""
import numpy as np

import probe
from probe.figures import claim, run_script
from probe.chart import pyplot

NAME = "p4-tokens"
TITLE = "Paper 4: the per-token gain of small init over γ 0.5, by token feature"
FEATURES = {"frequency": "token frequency", "bigram": "bigram surprisal", "context_benefit": "context benefit",
            "entropy": "predictive entropy"}


def small(ctx) -> float:
    """The small init compared with γ 0.5: γ 1 (paper 4) at the paper's size; at the CPU sizes γ 0.75, the
    critical γ there (p4-critical), where small init gains at all."""
    return 0.75 if ctx.quick else 1.0


def runs(ctx):
    return ctx.llm((0.5, small(ctx)), seeds=True)


def effect(ctx, runs):
    g = small(ctx)
    res = [probe.tokens(a, b)[0] for a, b in zip(runs[g, 1e-5, False], runs[0.5, 1e-5, False])]
    return [claim(f"γ {g:g} gains on γ 0.5 over all held-out tokens (total gain > 0)", [r.total_gain for r in res],
                  lambda v: v > 0),
            claim("the gain concentrates on hard tokens: the highest predictive-entropy quartile takes more than "
                  "half of it (share > 0.5; a quarter of the tokens)",
                  [r.buckets["entropy"][-1]["gain_share"] for r in res], lambda v: v > 0.5),
            # mean_delta = L(small) − L(γ 0.5): the logic gain exceeds the story gain when story − logic > 0
            claim("paper 4: the logic text gains more than the stories (held-out tokens: logic gain − story gain > 0)",
                  [r.groups["story"]["mean_delta"] - r.groups["logic"]["mean_delta"] for r in res], lambda v: v > 0,
                  expect=False)]


def make(ctx, runs):
    g = small(ctx)
    r = probe.tokens(runs[g, 1e-5, False][0], runs[0.5, 1e-5, False][0])[0]
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
    axes[-1].set_ylabel(f"mean ΔL = L(γ {g:g}) − L(γ 0.5) (nats)")
    axes[-1].set_title("by source", fontsize=9)
    fig.suptitle(f"{ctx.title(TITLE, text=True)}\n(γ {g:g}, seed 0): mean ΔL {r.mean_delta:+.3f} nats over {r.n} tokens")
    return ctx.save(fig, NAME)


if __name__ == "__main__":
    run_script(make)
