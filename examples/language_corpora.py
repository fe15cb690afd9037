"""Issue 38: paper 1's language effect and paper 4's logic-vs-story gain on logic + real narrative text
(``--stories kjv``: the King James Version's narrative books) next to logic + the built-in template
stories, over seeds. Four sweeps, then this script:

    probe-train sweep --preset lm-quick --grid seed=0:10 --grid gamma=0.3,0.8 --grid stories=kjv -o sweeps/p1-kjv
    probe-train sweep --preset lm-quick --grid seed=0:10 --grid gamma=0.3,0.8 -o sweeps/p1-synthetic
    probe-train sweep --preset llm-quick --grid seed=0:10 --grid gamma=0.5,0.75,1.0 --grid stories=kjv -o sweeps/p4-kjv
    probe-train sweep --preset llm-quick --grid seed=0:10 --grid gamma=0.5,0.75,1.0 -o sweeps/p4-synthetic
    python examples/language_corpora.py sweeps/p1-kjv sweeps/p1-synthetic sweeps/p4-kjv sweeps/p4-synthetic \\
        -o docs/results/language-corpora.json

What is measured, fixed before any result on kjv was seen (issue 38):

- **Paper 1, Fig. 7** (``lm-quick`` sweeps, γ 0.3 = large init against γ 0.8 = small init): the
  reasoning bias ΔL = (L_story − L_logic) / L_logic on the held-out documents of each source, at
  every snapshot. The paper's direction: ΔL is larger at small init, i.e. ΔL(γ 0.8) − ΔL(γ 0.3) > 0,
  seed-matched. Beside it the embedding effect: the mean off-diagonal cosine of the 50 most frequent
  logic tokens minus that of the story tokens, at small init, at the last step (paper: > 0).
- **Paper 4, the token gains** (``llm-quick`` sweeps, γ 0.75 = the critical γ of the CPU size
  (docs/explanation/paper4.md) against γ 0.5 = a larger init): the gain of the smaller init on each
  source, G = L(γ 0.5) − L(γ 0.75) in nats on its held-out documents at the last step, seed-matched.
  The paper's direction: logic gains more, G_logic − G_story > 0. Beside it the relative gain
  G / L(γ 0.5), and the same difference on the held-out token windows of ``probe tokens``; and the
  validation loss (the mean of the two sources') of every γ the sweep holds, to see where the critical
  γ lies on each corpus.

Each difference: its mean over seeds with a 95 % bootstrap interval, the fraction of seeds in the
paper's direction with its Wilson interval, and a verdict: ``shown`` (the interval is above 0),
``reversed`` (below 0) or ``not shown`` (it straddles 0). A sweep whose runs are not all finished
counts the seed pairs it has (said in ``n``).
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import warnings
from pathlib import Path

from _results import ci, fail, frac, write   # examples/_results.py, beside this script

import probe
from probe.analyses.uncertainty import verdict


def finished(folder: str) -> tuple[str, dict]:
    """(the model family, {(stories, γ, seed): run path}) of the finished runs in a sweep folder (its
    sweep.json), or in a folder of run files (each finished when its last snapshot is its last step)."""
    manifest = Path(folder) / "sweep.json"
    if manifest.is_file():
        try:
            paths = [Path(folder) / r["path"] for r in json.loads(manifest.read_text())["runs"] if r["status"] == "done"]
        except (OSError, ValueError, KeyError, TypeError):
            fail(f"{manifest}: not a sweep manifest written by probe-train sweep")
    elif Path(folder).is_dir():
        paths = sorted(Path(folder).glob("*.h5"))
    else:
        fail(f"{folder}: no such folder")
    out, models = {}, set()
    for path in paths:
        info = probe.info(path)
        cfg = info["config"]
        if not path.is_file() or info["steps"][-1] != cfg["steps"]:
            continue   # still training, or stopped: not a finished run
        if cfg["task"] != "lm":
            fail(f"{path}: a run of task {cfg['task']}, not of logic + stories (lm-quick, llm-quick)")
        out[cfg["stories"], cfg["gamma"], cfg["seed"]] = path
        models.add(cfg["model"])
    if len(models) > 1:
        fail(f"{folder}: runs of several models ({', '.join(sorted(models))}); one folder per paper")
    return next(iter(models), ""), out


def direction(diffs) -> dict:
    """A seed-matched difference whose paper direction is > 0: interval, fraction of seeds, verdict."""
    d, p = ci(diffs), frac([v > 0 for v in diffs])
    lo, hi = (math.nan if x is None else x for x in d["ci95"])   # one seed: no interval, "not shown"
    word = {"above": "shown", "below": "reversed"}.get(verdict(lo, hi, 0.0), "not shown")
    return {**d, "shown": p["shown"], "fraction": p["fraction"], "fraction_ci95": p["ci95"], "verdict": word}


def paper1(runs: dict, stories: str, large: float = 0.3, small: float = 0.8) -> dict:
    seeds = sorted(s for (c, g, s) in runs if c == stories and g == large and (c, small, s) in runs)
    traj = {g: [probe.bias(runs[stories, g, s], ("story", "logic"), step="all") for s in seeds]
            for g in (large, small)}
    steps = sorted(set.intersection(*[{r.step for r in t} for ts in traj.values() for t in ts])) if seeds else []
    at = {g: [{r.step: r.delta_L for r in t} for t in ts] for g, ts in traj.items()}
    by_step = {str(st): {f"g{large}": ci([a[st] for a in at[large]]), f"g{small}": ci([b[st] for b in at[small]]),
                         "diff": direction([b[st] - a[st] for a, b in zip(at[large], at[small])])} for st in steps}
    cos = {g: [(probe.similarity(runs[stories, g, s], "logic")[0].mean_offdiag,
                probe.similarity(runs[stories, g, s], "story")[0].mean_offdiag) for s in seeds] for g in (large, small)}
    loss = {g: [probe.info(runs[stories, g, s])["metrics"] for s in seeds] for g in (large, small)}
    return {"seeds": seeds, "steps": steps, "by_step": by_step,
            "last": by_step[str(steps[-1])] if steps else {},
            "loss": {f"g{g}": {src: ci([m[src]["loss"] for m in ms]) for src in ("logic", "story")}
                     for g, ms in loss.items()},
            "cos": {f"g{g}": {"logic": ci([a for a, _ in c]), "story": ci([b for _, b in c]),
                              "diff": direction([a - b for a, b in c])} for g, c in cos.items()}}


def paper4(runs: dict, stories: str, large: float = 0.5, small: float = 0.75) -> dict:
    seeds = sorted(s for (c, g, s) in runs if c == stories and g == large and (c, small, s) in runs)
    m = {g: [probe.info(runs[stories, g, s])["metrics"] for s in seeds] for g in (large, small)}
    gain = {src: [a[src]["loss"] - b[src]["loss"] for a, b in zip(m[large], m[small])] for src in ("logic", "story")}
    rel = {src: [g / a[src]["loss"] for g, a in zip(gain[src], m[large])] for src in gain}
    with warnings.catch_warnings():   # a negative total gain voids the gain *shares*, not used here
        warnings.simplefilter("ignore", probe.ProbeWarning)
        tok = [probe.tokens(runs[stories, small, s], runs[stories, large, s])[0].groups for s in seeds]
    tgain = {src: [-t[src]["mean_delta"] for t in tok] for src in ("logic", "story")}   # mean_delta: L(small) − L(large)
    every = sorted({g for (c, g, _) in runs if c == stories})   # the critical γ: lowest validation loss
    val = {f"g{g}": ci([sum(probe.info(p)["metrics"][src]["loss"] for src in ("logic", "story")) / 2
                        for (c, gg, _), p in sorted(runs.items()) if c == stories and gg == g]) for g in every}
    return {"seeds": seeds, "val_loss": val,
            "loss": {f"g{g}": {src: ci([x[src]["loss"] for x in ms]) for src in ("logic", "story")} for g, ms in m.items()},
            "gain": {**{src: ci(v) for src, v in gain.items()},
                     "diff": direction([a - b for a, b in zip(gain["logic"], gain["story"])])},
            "relative_gain": {**{src: ci(v) for src, v in rel.items()},
                              "diff": direction([a - b for a, b in zip(rel["logic"], rel["story"])])},
            "token_gain": {**{src: ci(v) for src, v in tgain.items()},
                           "diff": direction([a - b for a, b in zip(tgain["logic"], tgain["story"])])}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sweeps", nargs="+", help="sweep folders (probe-train sweep --out) of lm-quick and llm-quick "
                                              "runs, or folders of their run files")
    ap.add_argument("-o", "--out", required=True, help="the results file (JSON) to write")
    ap.add_argument("--commit", default=None, help="the commit the runs were trained at [default: git here]")
    a = ap.parse_args()
    values: dict = {"p1": {}, "p4": {}}
    seeds: set = set()
    for folder in a.sweeps:
        model, runs = finished(folder)   # paper 4's runs are LLaMA-style, paper 1's GPT-style
        which = ("p4", paper4) if model == "llama" else ("p1", paper1)
        for stories in sorted({c for c, _, _ in runs}):
            res = which[1](runs, stories)
            values[which[0]][stories] = res
            seeds |= set(res["seeds"])
            print(f"{folder}: {stories}: {len(res['seeds'])} seed pair(s)", file=sys.stderr)
    write(a.out, values, seeds, a.commit)

if __name__ == "__main__":
    main()
