"""Paper 2 (Figs. 14-16): the phase diagram of the answer on the unseen pair (4,3) over learning rate x
weight decay, one panel per γ: in each cell the fraction of seeds whose inferential accuracy exceeds
their symmetric one, with the seed count. The paper: large learning rate and large weight decay
promote the inferential solution.

    python examples/fig_p2_phase.py --size quick -o figures [--seeds 3]

At ``--quick`` a corner of the grid on composite-mini (1,200 steps: minutes on 2 cores); the whole
grid on composite-quick, 3-5 seeds a cell, is ``examples/p2_phase_diagram.sh`` and its results file
(docs/results/p2-phase.json, stated on the paper-2 page); at the papers' size the whole grid on
composite-paper (a GPU).
"""
import itertools

import numpy as np

import probe
from probe.figures import claim, run_script
from probe.chart import pyplot

NAME = "p2-phase"
TITLE = "Paper 2: inferential vs symmetric on (4,3) over learning rate × weight decay, per γ"
CAVEAT = ("a corner of the grid on composite-mini (d_model 64, 1,200 steps); paper 2's regime is d 400, the "
          "whole grid at CPU size is examples/p2_phase_diagram.sh")
PRESET = {"tiny": ("tiny", {"task": "composite", "key_min": 20, "key_max": 99}), "quick": ("composite-mini", {}),
          "full": ("composite-paper", {})}


def grid(ctx) -> tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...]]:
    """(learning rates, weight decays, gammas), floats as the sweep's flags give them (one hash)."""
    if ctx.size == "tiny":
        return (1e-3, 4e-3), (0.0, 1.0), (0.5, 1.0)
    if ctx.size == "quick":
        return (1e-3, 4e-3), (0.01, 1.0), (0.5, 0.8)
    return (5e-4, 1e-3, 2e-3, 4e-3), (0.0, 0.01, 0.1, 1.0), (0.5, 0.8, 1.0)


def runs(ctx):
    name, base = PRESET[ctx.size]
    lrs, wds, gammas = grid(ctx)
    wanted = {}
    for lr, wd, g, s in itertools.product(lrs, wds, gammas, range(ctx.seeds)):
        wanted[f"phase-lr{lr:g}-wd{wd:g}-g{g:g}" + (f"-s{s}" if s else "")] = {
            **base, "lr": lr, "weight_decay": wd, "gamma": g, **({"seed": s} if s else {})}
    return ctx.declare(name, wanted)


def _inferential(path) -> float:
    m = probe.info(path)["metrics"]
    return float(m["ood_inferential"]["acc"] > m["ood_symmetric"]["acc"])


def table(ctx, runs) -> dict:
    """(γ, lr, wd) -> per seed 1.0 (inferential > symmetric) or 0.0."""
    lrs, wds, gammas = grid(ctx)
    return {(g, lr, wd): [_inferential(runs[f"phase-lr{lr:g}-wd{wd:g}-g{g:g}" + (f"-s{s}" if s else "")])
                          for s in range(ctx.seeds)]
            for lr, wd, g in itertools.product(lrs, wds, gammas)}


def effect(ctx, runs):
    lrs, wds, gammas = grid(ctx)
    t = table(ctx, runs)
    g = 0.8 if 0.8 in gammas else gammas[0]
    corner, start = t[g, lrs[-1], wds[-1]], t[g, lrs[0], wds[0]]
    return [claim(f"at γ {g:g} the largest lr × weight decay is inferential at least as often as the smallest "
                  "(per seed: inferential at the large corner minus at the small one >= 0, and > 0 in some seed)",
                  [a - b for a, b in zip(corner, start)], lambda v: v >= 0)]


def make(ctx, runs):
    lrs, wds, gammas = grid(ctx)
    t = table(ctx, runs)
    plt = pyplot()
    fig, axes = plt.subplots(1, len(gammas), figsize=(3.4 * len(gammas), 3.4), constrained_layout=True,
                             squeeze=False)
    for ax, g in zip(axes[0], gammas):
        P = np.array([[np.mean(t[g, lr, wd]) for lr in lrs] for wd in wds])
        im = ax.imshow(P, origin="lower", vmin=0, vmax=1, cmap="coolwarm", aspect="auto")
        ax.grid(False)
        for i, wd in enumerate(wds):
            for j, lr in enumerate(lrs):
                k, n = int(sum(t[g, lr, wd])), len(t[g, lr, wd])
                ax.text(j, i, f"{k}/{n}", ha="center", va="center", fontsize=7)
        ax.set_xticks(range(len(lrs)), [f"{lr:g}" for lr in lrs], fontsize=7)
        ax.set_yticks(range(len(wds)), [f"{wd:g}" for wd in wds], fontsize=7)
        ax.set_xlabel("learning rate")
        ax.set_ylabel("weight decay")
        ax.set_title(f"γ {g:g}", fontsize=9)
    fig.colorbar(im, ax=axes[0].tolist(), label="P(inferential > symmetric on (4,3))", shrink=0.8)
    fig.suptitle(ctx.title(TITLE, CAVEAT), fontsize=9)
    return ctx.save(fig, NAME)


if __name__ == "__main__":
    run_script(make)
