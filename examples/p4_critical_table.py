"""Paper 4 at CPU size, over seeds: the tables of docs/explanation/paper4.md from one sweep of
``llm-quick`` runs (γ x RMSNorm ε x gated attention x seeds):

    probe-train sweep --preset llm-quick --grid gamma=0.5,0.75,1.0,1.25 --grid norm_eps=1e-5,1e-12 \\
        --grid gated_attention=false,true --grid seed=0:3 --out sweeps/p4 --jobs 2
    python examples/p4_critical_table.py sweeps/p4 [sweeps/p4-gate ...] [--json p4-table.json] > p4.md

``--json`` also writes every number of the table (each cell's columns with their seeds, γ*, the
seed-matched pairs, and per cell the weights' rank dip, the first snapshot's ε share and the largest
head's sink mass) as a docs results file (examples/_results.py), for the docs to insert.

Per cell (mean with its 95 % bootstrap interval over seeds): the final validation loss (mean of the
logic and story losses), both losses, paper 1's ΔL, the escape step, loss spikes, the largest ε share
of any norm site over training and the number of saturated snapshots, the mean sink mass; then γ*
(the γ of the lowest mean validation loss, with its bootstrap interval), and per seed-matched pair
(γ 1 against γ 0.5) the loss gain on logic against story text and the share of the per-token gain in
the top context-benefit quartile.
"""
import argparse
import json
import math
import warnings
from collections import defaultdict
from pathlib import Path

import _results as R   # examples/_results.py, beside this script: the docs results file
import numpy as np

import probe
from probe.analyses.uncertainty import argmin_x, describe, proportion


def ci(values, digits=3) -> str:
    d = describe(values)
    if not math.isfinite(d["mean"]):
        return "-"
    if not math.isfinite(d["ci_lo"]):
        return f"{d['mean']:.{digits}f}"
    return f"{d['mean']:.{digits}f} [{d['ci_lo']:.{digits}f}, {d['ci_hi']:.{digits}f}]"


def frac(flags) -> str:
    p = proportion(flags)
    return f"{p['k']}/{p['n']} [{p['ci_lo']:.2f}, {p['ci_hi']:.2f}]"


def numbers(path: Path) -> dict:
    info = probe.info(path)
    m = info["metrics"]
    dyn = probe.dynamics(path)[0]
    norms = probe.norms(path, step="all")
    sinks = probe.sinks(path)[0]
    ranks = probe.rank(path, step="all")
    layers = [n for n in ranks[0].names if n.startswith("layer")]
    weight_rank = [np.mean([r.numbers[n]["effective_rank"] for n in layers]) for r in ranks]
    return {"val": (m["logic"]["loss"] + m["story"]["loss"]) / 2, "logic": m["logic"]["loss"],
            "story": m["story"]["loss"], "delta": probe.bias(path)[0].delta_L,
            "escape": np.nan if dyn.escape_step is None else dyn.escape_step, "spikes": dyn.spikes,
            "max_share": max(float(r.eps_share.max()) for r in norms), "first_share": float(norms[0].eps_share.max()),
            "saturated": sum(1 for r in norms if r.saturated), "snapshots": len(norms),
            "sink": float(sinks.sink_mass.mean()), "sink_head_max": float(sinks.sink_mass.max()),
            "uniform_mass": float(sinks.uniform_mass), "dip": float(min(weight_rank) / weight_rank[0])}


SWEEP = ("probe-train sweep --preset llm-quick --grid gamma=0.5,0.75,1.0,1.25 --grid norm_eps=1e-5,1e-12 "
         "--grid seed=0:3 --out {out} --jobs 2")


def sweep_runs(root: str) -> list:
    """The runs of the sweep in ``root`` (its sweep.json), or the error that says how to make it."""
    manifest = Path(root) / "sweep.json"
    if not manifest.is_file():
        R.fail(f"{root}: no sweep there (no sweep.json); make it with: {SWEEP.format(out=root)}")
    try:
        sweep = json.loads(manifest.read_text())
        runs, grid = sweep["runs"], sweep["grid"]
    except (OSError, ValueError, KeyError, TypeError):
        R.fail(f"{manifest}: not a sweep manifest written by probe-train sweep")
    if "gamma" not in grid:   # the cells are γ x ε x gate: another sweep has no table here
        R.fail(f"{root}: a sweep over {', '.join(grid) or 'nothing'}, not over gamma; the paper-4 sweep is: "
             f"{SWEEP.format(out=root)}")
    return runs


def name(g: float, e: float, gate: bool) -> str:
    return f"g{g:g}-eps{e:g}-{'gated' if gate else 'plain'}"   # a key of the results file


def main(roots: list[str], out: str | None = None, commit: str | None = None) -> None:
    values: dict = {"cells": {}, "critical": {}, "pairs": {}}
    seeds: set = set()
    cells: dict[tuple, list] = defaultdict(list)
    files: dict[tuple, dict] = {}
    runs = []
    for root in roots:   # several sweeps (e.g. the gate-on cells in a folder of their own) in one table
        runs += [(Path(root), r) for r in sweep_runs(root)]
    if not any(r.get("status") == "done" and (folder / r["path"]).exists() for folder, r in runs):
        R.fail(f"{', '.join(roots)}: no finished run yet; train (or finish: finished runs are reused) with: "
             f"{SWEEP.format(out=roots[0])}")
    for folder, r in runs:
        path = folder / r["path"]
        if r.get("status") != "done" or not path.exists():
            continue
        p = r["point"]
        key = (float(p["gamma"]), float(p.get("norm_eps", 1e-5)), bool(p.get("gated_attention", False)))
        if not {"logic", "story"} <= set(probe.info(path)["metrics"]):
            R.fail(f"{path}: no logic and story losses (not a run of the lm task); the paper-4 sweep is: "
                 f"{SWEEP.format(out=folder)}")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cells[key].append(numbers(path))
        files[key + (int(p.get("seed", 0)),)] = path
        seeds.add(int(p.get("seed", 0)))
    print("| γ | ε | gate | seeds | val loss | logic loss | story loss | ΔL | escape step | spikes | max ε share "
          "| saturated snapshots | sink mass |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for key in sorted(cells):
        g, e, gate = key
        rows = cells[key]
        col = lambda k, d=3: ci([r[k] for r in rows], d)  # noqa: E731
        print(f"| {g:g} | {e:g} | {'on' if gate else 'off'} | {len(rows)} | {col('val')} | {col('logic')} | "
              f"{col('story')} | {col('delta', 2)} | {col('escape', 0)} | {col('spikes', 1)} | {col('max_share', 4)} | "
              f"{col('saturated', 1)} | {col('sink', 3)} |")
        values["cells"][name(*key)] = {"seeds": len(rows), **{
            k: {**R.ci([r[k] for r in rows]), "min": R.finite(float(np.nanmin([r[k] for r in rows]))),
                "max": R.finite(float(np.nanmax([r[k] for r in rows])))} for k in rows[0]}}
    print()
    for e in sorted({k[1] for k in cells}):
        for gate in sorted({k[2] for k in cells}):
            G = sorted(k[0] for k in cells if k[1] == e and k[2] == gate)
            if len(G) < 2:
                continue
            star = argmin_x(G, [[r["val"] for r in cells[g, e, gate]] for g in G])
            star_l = argmin_x(G, [[r["logic"] for r in cells[g, e, gate]] for g in G])
            values["critical"][f"eps{e:g}-{'gated' if gate else 'plain'}"] = {
                "gamma": star["x"], "ci95": [star["ci_lo"], star["ci_hi"]], "share": star["share"],
                "logic_gamma": star_l["x"]}
            print(f"- ε {e:g}, gate {'on' if gate else 'off'}: γ* (lowest validation loss) {star['x']:g} "
                  f"[{star['ci_lo']:g}, {star['ci_hi']:g}] (picked in {100 * star['share']:.0f}% of resamples); "
                  f"lowest logic loss at γ {star_l['x']:g} [{star_l['ci_lo']:g}, {star_l['ci_hi']:g}]")
    print()
    # seed-matched pairs: a smaller init (γ > 0.5) against γ 0.5
    for e, gate, g in sorted({(k[1], k[2], k[0]) for k in cells if k[0] > 0.5}):
        if True:
            pairs = [(files[g, e, gate, s], files[0.5, e, gate, s]) for s in range(10)
                     if (g, e, gate, s) in files and (0.5, e, gate, s) in files]
            if not pairs:
                continue
            gain_logic, gain_story, top_share, flags_c, flags_d = [], [], [], [], []
            feature_top: dict[str, list] = defaultdict(list)
            for small, large in pairs:
                a, b = probe.info(small)["metrics"], probe.info(large)["metrics"]
                gl, gs = b["logic"]["loss"] - a["logic"]["loss"], b["story"]["loss"] - a["story"]["loss"]
                gain_logic.append(gl)
                gain_story.append(gs)
                flags_c.append(gl > gs)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    t = probe.tokens(small, large)[0]
                for f, bs in t.buckets.items():   # the quartile of the hardest tokens (rarest for frequency)
                    feature_top[f].append((bs[0] if f == "frequency" else bs[-1])["gain_share"])
                q4 = t.buckets["context_benefit"][-1]
                top_share.append(q4["gain_share"])
                flags_d.append(q4["gain_share"] > q4["token_share"] and t.total_gain > 0)
            values["pairs"][name(g, e, gate)] = {
                "n": len(pairs), "gain_logic": R.ci(gain_logic), "gain_story": R.ci(gain_story),
                "logic_more": R.frac(flags_c), "top_context_share": R.ci(top_share),
                "top_context_over": R.frac(flags_d), "hardest": {f: R.ci(v) for f, v in feature_top.items()}}
            print(f"- ε {e:g}, gate {'on' if gate else 'off'}, γ {g:g} vs γ 0.5 over {len(pairs)} seed pairs: loss gain on "
                  f"logic {ci(gain_logic)} vs story {ci(gain_story)} nats; logic gains more in {frac(flags_c)}; "
                  f"share of the per-token gain in the top context-benefit quartile {ci(top_share)} (its token share "
                  f"0.25); top quartile over its share with a positive total gain in {frac(flags_d)}; gain share of "
                  f"the hardest quartile by feature: " + ", ".join(f"{f} {ci(v, 2)}" for f, v in feature_top.items()))


    if out:
        R.write(out, values, seeds, commit)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sweeps", nargs="*", default=["sweeps/p4"], help="sweep folders [default: sweeps/p4]")
    ap.add_argument("--json", help="also write every number as a docs results file (JSON)")
    ap.add_argument("--commit", help="the commit the runs were trained at [default: git here]")
    a = ap.parse_args()
    try:
        main(a.sweeps, a.json, a.commit)
    except probe.ProbeError as exc:   # a damaged or unfinished run file: its one line, not a traceback
        R.fail(str(exc))
