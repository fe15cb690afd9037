"""A sweep's seed table as a docs results file: ``probe sweep-summary``'s numbers per grid cell, with
what they were measured on, for the docs to insert (docs/hooks.py) instead of typing them:

    probe-train sweep --preset quick --grid gamma=0.3,0.8 --grid seed=0:5 --out sweeps/p1 --jobs 2
    python examples/seed_table.py sweeps/p1 --metric "acc[rsn_test]" --outcome "acc[rsn_test]>0.5" \\
        -o docs/results/p1-seeds.json

The file holds, per cell (``gamma=0.8``), each metric as ``{"mean", "ci95"}`` (95 % bootstrap interval
over seeds; a page inserts it with ``[[p1-seeds:gamma=0.8/acc(rsn_test)|ci.3f]]``) and each outcome as
``{"shown": "k/n", "ci95"}`` (Wilson interval). In names, square brackets become parentheses
(``acc[rsn_test]`` is ``acc(rsn_test)``): a name in a page ends at ``]]``.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from _results import count_entry, fail, mean_entry, write   # examples/_results.py, beside this script

import probe


def key(name: str) -> str:
    return name.replace("[", "(").replace("]", ")")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sweep", help="a sweep folder (probe-train sweep --out)")
    ap.add_argument("--metric", action="append", default=[], help="as probe sweep-summary --metric (repeat)")
    ap.add_argument("--outcome", action="append", default=[], help="as probe sweep-summary --outcome (repeat)")
    ap.add_argument("-o", "--out", required=True, help="the results file (JSON) to write")
    ap.add_argument("--commit", default=None, help="the commit the runs were trained at [default: git here]")
    a = ap.parse_args()
    try:
        cells = probe.sweep_summary(a.sweep, a.metric or None, a.outcome or None)
    except probe.ProbeError as e:
        fail(str(e))
    folder = Path(a.sweep).parent if Path(a.sweep).is_file() else Path(a.sweep)   # a folder or its sweep.json
    values, seeds, runs = {}, set(), []
    for c in cells:
        label = ",".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in c.cell.items()) or "all"
        values[label] = {**{key(m): mean_entry(s) for m, s in c.stats.items()},
                         **{key(o): count_entry(s) for o, s in c.outcomes.items()}}
        seeds |= {probe.info(folder / r)["config"]["seed"] for r in c.runs}
        runs += [folder / r for r in c.runs]
    write(a.out, values, seeds, a.commit, runs=runs, step=cells[0].step if cells else None)

if __name__ == "__main__":
    main()
