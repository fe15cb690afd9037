"""The paper-2 direction map as a Markdown table: one row per (setting, γ) cell of the sweeps that
``examples/p2_direction_map.sh`` trains, with the init std the γ gives at that width and the fraction
of seeds (with its 95 % Wilson interval) that fit the training data, answer (4,3) inferentially
(x − 10) or symmetrically (x − 6).

    python examples/p2_direction_table.py sweeps/p2-map > map.md
"""
import sys
from pathlib import Path

from _results import fail   # examples/_results.py, beside this script

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


def fraction(o: dict) -> str:
    return f"{o['k']}/{o['n']} [{o['ci_lo']:.2f}, {o['ci_hi']:.2f}]"


def main(root: str) -> None:
    make = (f"make them with: bash examples/p2_direction_map.sh {root} (per setting a probe-train sweep, e.g. "
            f"probe-train sweep --preset composite-quick --grid gamma=0.3,0.5,0.8,1.0,1.2,1.5 --grid layers=2 "
            f"--grid seed=0:5 --out {root}/base)")
    if not any((Path(root) / name / "sweep.json").is_file() for name in SETTINGS):
        fail(f"{root}: none of the direction map's sweeps there ({', '.join(SETTINGS)}, each with a sweep.json); "
             + make)
    rows = []   # every row before the first line: an error leaves no half table on stdout
    for name, text in SETTINGS.items():
        folder = Path(root) / name
        if not (folder / "sweep.json").exists():
            continue
        for cell in probe.sweep_summary(folder, metric=["acc[ood_inferential]", "acc[ood_symmetric]"],
                                        outcome=list(OUTCOMES.values())):
            with probe.Run(folder / cell.runs[0]) as run:
                d = run.config["d_model"]
            if "gamma" not in cell.cell:   # the rows are γ cells: another sweep has no row here
                fail(f"{folder}: a sweep of {cell.label}, not over gamma; " + make)
            g = cell.cell["gamma"]
            o = {k: cell.outcomes[v] for k, v in OUTCOMES.items()}
            inf, sym = cell.stats["acc[ood_inferential]"]["mean"], cell.stats["acc[ood_symmetric]"]["mean"]
            rows.append(f"| {text} | {g} | {d ** -g:.4f} | {fraction(o['fit'])} | {fraction(o['inf>sym'])} "
                        f"| {fraction(o['inf>0.5'])} | {fraction(o['sym>0.5'])} | {inf:.2f} / {sym:.2f} |")
            text = "″"
    print("| setting | γ | init std | fit train | inferential > symmetric | inferential > 0.5 "
          "| symmetric > 0.5 | mean inf / sym |")
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    import warnings

    # a note (runs left out of a cell) as the toolkit's commands print one: one line, no source line
    warnings.showwarning = lambda message, *_: print(f"warning: {message}", file=sys.stderr)
    try:
        main(sys.argv[1] if len(sys.argv) > 1 else "sweeps/p2-map")
    except probe.ProbeError as exc:   # e.g. a sweep with no finished run yet: its one line, not a traceback
        fail(str(exc))
