"""The paper-2 direction map as a Markdown table: one row per (setting, γ) cell of the sweeps that
``examples/p2_direction_map.sh`` trains, with the init std the γ gives at that width and the fraction
of seeds (with its 95 % Wilson interval) that fit the training data, answer (4,3) inferentially
(x − 10) or symmetrically (x − 6).

    python examples/p2_direction_table.py sweeps/p2-map > map.md
    python examples/p2_direction_table.py sweeps/p2-map -o docs/results/p2-map.json

``-o`` also writes the numbers as a docs results file (docs/hooks.py inserts them): per setting and
γ cell (``authors/gamma=0.8``) the init std, each outcome (``fit``, ``inf>sym``, ``inf>0.5``,
``sym>0.5``) as ``{"shown": "k/n", "ci95"}`` and the mean accuracies ``inf``, ``sym``; ``table`` is the
table itself, ``fitted`` what the cells that fit the training data in every seed say.
"""
import argparse
import sys
from pathlib import Path

from _results import count_entry, fail, mean_entry, write   # examples/_results.py, beside this script

import probe

SETTINGS = {  # folder: what it changes against composite-quick
    "base": "composite-quick (d 64, 4k steps, wd 0.1, 30k seqs)",
    "long": "12k steps",
    "width": "d_model 128, d_ff 512",
    "width256": "d_model 256, d_ff 1024",
    "authors": "authors' code: warm-up from lr/20, floor lr/20, head + LN biases, decay all, wd 0.01",
    "wd": "weight decay 0.01",
    "data": "100k sequences",
}
OUTCOMES = {
    "fit": "acc[train]>0.95",
    "inf>sym": "acc[ood_inferential]>acc[ood_symmetric]",
    "inf>0.5": "acc[ood_inferential]>0.5",
    "sym>0.5": "acc[ood_symmetric]>0.5",
}
METRICS = {"inf": "acc[ood_inferential]", "sym": "acc[ood_symmetric]"}


def fraction(o: dict) -> str:
    return f"{o['shown']} [{o['ci95'][0]:.2f}, {o['ci95'][1]:.2f}]"


def main(root: str, out: str | None, trained_at: str | None) -> None:
    make = (f"make them with: bash examples/p2_direction_map.sh {root} (per setting a probe-train sweep, e.g. "
            f"probe-train sweep --preset composite-quick --grid gamma=0.3,0.5,0.8,1.0,1.2,1.5 --grid layers=2 "
            f"--grid seed=0:5 --out {root}/base)")
    if not any((Path(root) / name / "sweep.json").is_file() for name in SETTINGS):
        fail(f"{root}: none of the direction map's sweeps there ({', '.join(SETTINGS)}, each with a sweep.json); "
             + make)
    rows, values, seeds = [], {}, set()   # every row before the first line: an error leaves no half table
    for name, text in SETTINGS.items():
        folder = Path(root) / name
        if not (folder / "sweep.json").exists():
            continue
        for cell in probe.sweep_summary(folder, metric=list(METRICS.values()), outcome=list(OUTCOMES.values())):
            with probe.Run(folder / cell.runs[0]) as run:
                d = run.config["d_model"]
            if "gamma" not in cell.cell:   # the rows are γ cells: another sweep has no row here
                fail(f"{folder}: a sweep of {cell.label}, not over gamma; " + make)
            g = cell.cell["gamma"]
            seeds |= {probe.info(folder / r)["config"]["seed"] for r in cell.runs}
            v = {"std": d ** -g, "d_model": d, **{k: count_entry(cell.outcomes[o]) for k, o in OUTCOMES.items()},
                 **{k: mean_entry(cell.stats[m]) for k, m in METRICS.items()}}
            values.setdefault(name, {})[f"gamma={g:g}"] = v
            rows.append(f"| {text} | {g} | {v['std']:.4f} | {fraction(v['fit'])} | {fraction(v['inf>sym'])} "
                        f"| {fraction(v['inf>0.5'])} | {fraction(v['sym>0.5'])} "
                        f"| {v['inf']['mean']:.2f} / {v['sym']['mean']:.2f} |")
            text = "″"
    table = "\n".join(["| setting | γ | init std | fit train | inferential > symmetric | inferential > 0.5 "
                       "| symmetric > 0.5 | mean inf / sym |", "|---|---|---|---|---|---|---|---|", *rows])
    print(table)
    if out:
        write(out, {**values, "table": table, "cells": len(rows), "fitted": fitted(values)}, seeds, trained_at)


def share(entry: dict) -> float:
    """The fraction of seeds of a ``{"shown": "k/n"}`` entry."""
    k, n = map(int, entry["shown"].split("/"))
    return k / n


def fitted(values: dict) -> dict:
    """Over the cells whose every seed fits the training data: how many, the one most often inferential
    and the one least often symmetric (``{"shown", "ci95", "cell"}``, the cell in words)."""
    cells = [(f"{SETTINGS[name]}, γ {g.removeprefix('gamma=')}", v) for name, by_g in values.items()
             for g, v in by_g.items() if share(v["fit"]) == 1]
    if not cells:
        return {"cells": 0}
    most, v_most = max(cells, key=lambda c: share(c[1]["inf>sym"]))
    least, v_least = min(cells, key=lambda c: share(c[1]["sym>0.5"]))
    return {"cells": len(cells), "most_inf>sym": {**v_most["inf>sym"], "cell": most},
            "least_sym>0.5": {**v_least["sym>0.5"], "cell": least}}


if __name__ == "__main__":
    import warnings

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("root", nargs="?", default="sweeps/p2-map", help="the map's folder [default: sweeps/p2-map]")
    ap.add_argument("-o", "--out", help="also write the numbers as a docs results file (JSON)")
    ap.add_argument("--commit", help="the commit the runs were trained at [default: git here]")
    a = ap.parse_args()
    # a note (runs left out of a cell) as the toolkit's commands print one: one line, no source line
    warnings.showwarning = lambda message, *_: print(f"warning: {message}", file=sys.stderr)
    try:
        main(a.root, a.out, a.commit)
    except probe.ProbeError as exc:   # e.g. a sweep with no finished run yet: its one line, not a traceback
        fail(str(exc))
