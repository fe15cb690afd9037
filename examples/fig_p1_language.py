"""Paper 1, Fig. 7: the real-language experiment. A GPT-2-like model trained on PrOntoQA-style
logic mixed with stories: ΔL = (L_story − L_logic) / L_logic during training and at the end
against γ, and the embedding cosine matrices of logic vs story tokens at small and large init.

    python examples/fig_p1_language.py --size quick -o figures
"""
import probe
from probe.figures import claim, run_script
from probe.chart import gamma_color, heatmap, points_with_ci, pyplot, seed_band

NAME = "p1-language"
TITLE = "Paper 1 Fig. 7: reasoning bias ΔL on logic + stories, and token-embedding cosines"
CAVEAT = ("at CPU size (lm-mini, 300 steps) ΔL is larger at small init on either story text; 1500-step lm-quick runs "
          "keep that order on the King James text and reverse it on the template stories (ten seeds each: the "
          "explanation page of paper 1); the "
          "paper's size is lm-gpt2 on TinyStories (a GPU, not run here)")


def runs(ctx):
    # the two ends at the CPU sizes (what the effect compares), γ 0.5 between them at the paper's size
    return ctx.lm((0.3, 0.8) if ctx.quick else (0.3, 0.5, 0.8), seeds=True)


def _cos(path, group) -> float:
    return probe.similarity(path, group)[0].mean_offdiag


def effect(ctx, runs):
    delta = {g: [probe.bias(p, ("story", "logic"))[0].delta_L for p in ps] for g, ps in runs.items()}
    return [claim("paper 1: at γ 0.8 logic tokens are more alike than story tokens (mean cosine logic − story > 0)",
                  [_cos(p, "logic") - _cos(p, "story") for p in runs[0.8]], lambda v: v > 0),
            claim("paper 1: ΔL at the last step is larger at small init: γ 0.8 − γ 0.3 > 0 (seed-matched)",
                  [b - a for a, b in zip(delta[0.3], delta[0.8])], lambda v: v > 0)]


def make(ctx, seeded):
    GAMMAS = tuple(seeded)
    runs = {g: paths[0] for g, paths in seeded.items()}
    plt = pyplot()
    fig = plt.figure(figsize=(14, 7.2), constrained_layout=True)
    top = fig.subfigures(2, 1)
    traj, final = top[0].subplots(1, 2)
    for g in GAMMAS:
        per_seed = [probe.bias(p, ("story", "logic"), step="all") for p in seeded[g]]
        seed_band(traj, [r.step for r in per_seed[0]], [[r.delta_L for r in b] for b in per_seed], gamma_color(g),
                  label=f"γ = {g}")
    traj.set_xlabel("step")
    traj.set_ylabel("ΔL = (L_story − L_logic) / L_logic")
    traj.set_title("reasoning bias during training")
    traj.legend(frameon=False)
    last = [[probe.bias(p, ("story", "logic"))[0].delta_L for p in seeded[g]] for g in GAMMAS]
    points_with_ci(final, GAMMAS, last, "k", label="ΔL at the last step")
    final.set_xlabel("initialization rate γ")
    final.set_ylabel("ΔL at the last step")
    final.set_title("ΔL against γ")
    axes = top[1].subplots(1, 4)
    im = None
    for k, (g, group) in enumerate([(g, grp) for g in (0.8, 0.3) for grp in ("logic", "story")]):
        r = probe.similarity(runs[g], group)[0]
        n = min(len(r.ids), 40)
        im = heatmap(axes[k], r.matrix[:n, :n])
        axes[k].set_title(f"γ = {g}, {group} tokens\nmean cos {r.mean_offdiag:.2f}")
        axes[k].set_xlabel("token (by frequency)")
    top[1].colorbar(im, ax=axes, shrink=0.8, label="cosine similarity")
    fig.suptitle(ctx.title(TITLE, CAVEAT, text=True))
    return ctx.save(fig, NAME)


if __name__ == "__main__":
    run_script(make)
