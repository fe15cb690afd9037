"""Paper 2's phase diagram at CPU size as numbers: per (learning rate, weight decay, γ) cell of the runs
``examples/p2_phase_diagram.sh`` trains, over its seeds, the fraction that answers the unseen pair
(4,3) inferentially rather than symmetrically, that answers it symmetrically (accuracy > 0.5) and that
fits the training data, each with its 95 % Wilson interval.

    python examples/p2_phase_table.py sweeps/p2-phase > phase.md
    python examples/p2_phase_table.py sweeps/p2-phase -o docs/results/p2-phase.json
    python examples/p2_phase_table.py sweeps/p2-phase --near-half     # the cells that get 2 more seeds
                                                                      # (1, 2 or 3 of 3 inferential)

The runs are OUT/grid (the whole grid, 3 seeds) and OUT/more/* (2 more seeds of some cells); a cell
takes every finished run of its point from both. ``-o`` writes the docs results file: per
``gamma=G`` and ``lr=L,wd=W`` the init std, ``inf>sym``, ``sym>0.5`` and ``fit`` as ``{"shown": "k/n",
"ci95", "fraction"}`` and the mean accuracies ``inf``, ``sym``; ``table`` the Markdown table.
"""
import argparse
import sys
from pathlib import Path

from _results import ci, fail, frac, write   # examples/_results.py, beside this script

import probe

FIELDS = ("lr", "weight_decay", "gamma")


def outcomes(path) -> dict:
    """A run's last accuracies and what they say."""
    m = probe.info(path)["metrics"]
    inf, sym, fit = (m.get(s, {}).get("acc") for s in ("ood_inferential", "ood_symmetric", "train"))
    if None in (inf, sym, fit):
        fail(f"{path}: not a composite-task run (no train, ood_inferential and ood_symmetric accuracy)")
    return {"inf": inf, "sym": sym, "inf>sym": inf > sym, "sym>0.5": sym > 0.5, "fit": fit > 0.95}


def cells(root: str) -> dict[tuple, list[str]]:
    """(lr, weight decay, γ) -> the finished runs of that point, from every sweep under ``root``."""
    folders = [Path(root) / "grid", *sorted((Path(root) / "more").glob("*"))]
    folders = [f for f in folders if (f / "sweep.json").is_file()]
    if not folders:
        fail(f"{root}: no sweep there (grid/sweep.json); make it with: bash examples/p2_phase_diagram.sh {root}")
    out: dict[tuple, list[str]] = {}
    for folder in folders:
        try:
            summary = probe.sweep_summary(folder)
        except probe.ProbeError as exc:   # further seeds still training: the cell counts the runs that ended
            if folder.name == "grid":
                raise
            print(f"warning: {exc}; left out", file=sys.stderr)
            continue
        for cell in summary:
            missing = [f for f in FIELDS if f not in cell.cell]
            with probe.Run(folder / cell.runs[0]) as run:
                config = run.config
            key = tuple(float(cell.cell.get(f, config[f])) for f in FIELDS)   # a sweep of one cell grids none
            if missing and len(missing) == len(FIELDS) and folder.name == "grid":
                fail(f"{folder}: a sweep of {cell.label}, not over lr, weight_decay and gamma")
            out.setdefault(key, []).extend(str(folder / r) for r in cell.runs)
    return out


def main(root: str, out: str | None, near_half: bool, trained_at: str | None) -> None:
    found = cells(root)
    per_run = {k: [outcomes(p) for p in runs] for k, runs in found.items()}
    if near_half:   # 1, 2 or 3 of 3 seeds inferential: where 2 more seeds decide, or can show it (5/5)
        for (lr, wd, g), rs in sorted(per_run.items()):
            if len(rs) == 3 and sum(r["inf>sym"] for r in rs) >= 1:
                print(f"{lr:g} {wd:g} {g:g}")
        return
    values, rows, seeds = {}, [], set()
    for (lr, wd, g), rs in sorted(per_run.items(), key=lambda kv: (kv[0][2], kv[0][0], kv[0][1])):
        with probe.Run(found[lr, wd, g][0]) as run:
            d = run.config["d_model"]
        seeds |= {probe.info(p)["config"]["seed"] for p in found[lr, wd, g]}
        v = {"std": d ** -g, "d_model": d, **{k: frac([r[k] for r in rs]) for k in ("inf>sym", "sym>0.5", "fit")},
             **{k: ci([r[k] for r in rs]) for k in ("inf", "sym")}}
        values.setdefault(f"gamma={g:g}", {})[f"lr={lr:g},wd={wd:g}"] = v
        rows.append(f"| {g:g} | {d ** -g:.4f} | {lr:g} | {wd:g} | {said(v['inf>sym'])} | {said(v['sym>0.5'])} "
                    f"| {said(v['fit'])} | {v['inf']['mean']:.2f} / {v['sym']['mean']:.2f} |")
    table = "\n".join(["| γ | init std | lr | weight decay | inferential > symmetric | symmetric > 0.5 | fit train "
                       "| mean inf / sym |", "|---|---|---|---|---|---|---|---|", *rows])
    print(table)
    if out:
        write(out, {**values, "table": table, "cells": len(rows), "summary": summary(values)}, seeds, trained_at,
              runs=[p for runs in found.values() for p in runs])


def summary(values: dict) -> dict:
    """Per γ: the cell most often inferential (its fraction and cell), how many cells show inferential >
    symmetric (the Wilson interval above 1/2; and of them how many show that their runs fit train) and how
    many show the reverse (below 1/2), and the two corners
    the paper compares (the largest lr with the largest decay, the smallest with the smallest)."""
    out = {}
    for g, cells in values.items():
        def key(cell):
            lr, wd = (float(x.split("=")[1]) for x in cell.split(","))
            return lr, wd
        best = max(cells, key=lambda c: (cells[c]["inf>sym"]["fraction"], key(c)))
        big, small = max(cells, key=key), min(cells, key=key)
        out[g] = {"best": {**cells[best]["inf>sym"], "cell": best.replace(",", ", ").replace("wd=", "weight decay ")
                           .replace("lr=", "lr ")},
                  "inferential_shown": sum(c["inf>sym"]["ci95"][0] > 0.5 for c in cells.values()),
                  # of those, the cells that also show their runs fit train: an answer of a model that learned
                  "inferential_shown_fit": sum(c["inf>sym"]["ci95"][0] > 0.5 and c["fit"]["ci95"][0] > 0.5
                                               for c in cells.values()),
                  "symmetric_shown": sum(c["inf>sym"]["ci95"][1] < 0.5 for c in cells.values()),
                  "fit_all": sum(c["fit"]["fraction"] == 1 for c in cells.values()),
                  "cells": len(cells), "large_corner": cells[big]["inf>sym"], "small_corner": cells[small]["inf>sym"]}
    return out


def said(o: dict) -> str:
    return f"{o['shown']} [{o['ci95'][0]:.2f}, {o['ci95'][1]:.2f}]"


if __name__ == "__main__":
    import warnings

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("root", nargs="?", default="sweeps/p2-phase", help="the diagram's folder [default: sweeps/p2-phase]")
    ap.add_argument("-o", "--out", help="also write the numbers as a docs results file (JSON)")
    ap.add_argument("--near-half", action="store_true", help="print the cells 2 more seeds can decide or show (1-3 of 3 seeds "
                    "inferential; lr wd gamma a line) and exit")
    ap.add_argument("--commit", help="the commit the runs were trained at [default: git here]")
    a = ap.parse_args()
    warnings.showwarning = lambda message, *_: print(f"warning: {message}", file=sys.stderr)
    try:
        main(a.root, a.out, a.near_half, a.commit)
    except probe.ProbeError as exc:
        fail(str(exc))
