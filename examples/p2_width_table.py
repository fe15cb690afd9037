"""Paper 2's best CPU cells across widths as numbers: per cell (γ, learning rate, weight decay, fixed γ or
fixed std) and width, over its seeds, the fraction that answers the unseen pair (4,3) inferentially
rather than symmetrically, symmetrically (accuracy > 0.5) and that fits the training data (Wilson
intervals); and per step the log-log slope of RD = ||W_t - W_0|| / ||W_0|| against the width per group,
with its 95 % interval over seeds and the regime it shows (probe regime --widths).

    bash examples/p2_width_sweep.sh sweeps/p2-width 2
    python examples/p2_width_table.py sweeps/p2-width -o docs/results/p2-width.json

Every run file under each ROOT counts (any folder layout); runs are grouped by the fields a width sweep keeps
(γ, lr, weight decay, gamma_ref_width), and a group needs two widths or more. ``-o`` writes the docs
results file: per cell ``widths`` ({width: {"std", "inf>sym", "sym>0.5", "fit", "inf", "sym"}}) and
``slopes`` ({step: {group: {"mean", "ci95", "n", "regime"}}}, over the seeds with a run at every width,
``slope_seeds``) and ``rd`` ({step: {group: {width: mean RD over those seeds}}}); ``table`` the Markdown table.
"""
import argparse
import sys
from pathlib import Path

from _results import ci, fail, finite, frac, write   # examples/_results.py, beside this script
from p2_phase_table import outcomes, said   # the outcomes of a run, as the phase diagram reads them

import probe
from probe.analyses.regime import MATRIX_GROUPS

STEPS = "64,1000,4000"   # early (the first updates' scaling), middle, last


def cell_name(cfg: dict) -> str:
    """``gamma=0.5,lr=0.001,wd=1,init=fixed-gamma`` (std d^-gamma) or ``...,init=fixed-std-64`` (64^-gamma)."""
    mode = f"fixed-std-{cfg['gamma_ref_width']}" if cfg.get("gamma_ref_width") else "fixed-gamma"
    return f"gamma={cfg['gamma']:g},lr={cfg['lr']:g},wd={cfg['weight_decay']:g},init={mode}"


def groups(roots: list[str]) -> dict[str, dict[Path, dict]]:
    """Cell name -> its run files (every snapshot file under each of ``roots``), each with its config."""
    out: dict[str, dict[Path, dict]] = {}
    for path in sorted(p for root in roots for p in Path(root).rglob("*.h5")):
        info = probe.info(path)
        if info["steps"][-1] < info["config"]["steps"]:   # a run still training (or stopped): not yet a result
            print(f"warning: {path}: at step {info['steps'][-1]} of {info['config']['steps']}; left out", file=sys.stderr)
            continue
        out.setdefault(cell_name(info["config"]), {})[path] = info["config"]
    if not out:
        fail(f"{', '.join(roots)}: no run files")
    return out


def std_of(cfg: dict) -> float:
    return (cfg.get("gamma_ref_width") or cfg["d_model"]) ** -cfg["gamma"]


def main(roots: list[str], out: str | None, steps: str, trained_at: str | None) -> None:
    values, rows, seeds, runs = {}, [], set(), []
    for name, config in groups(roots).items():
        paths = list(config)
        by_width: dict[int, list] = {}
        cfgs = {}
        for p, cfg in config.items():
            by_width.setdefault(cfg["d_model"], []).append(outcomes(p))
            cfgs[cfg["d_model"]] = cfg
            seeds.add(cfg["seed"])
        if len(by_width) < 2:
            print(f"warning: {name}: one width only ({next(iter(by_width))}); left out", file=sys.stderr)
            continue
        runs += paths
        widths = {}
        for w in sorted(by_width):
            rs = by_width[w]
            widths[str(w)] = {"std": std_of(cfgs[w]), **{k: frac([r[k] for r in rs]) for k in ("inf>sym", "sym>0.5", "fit")},
                              **{k: ci([r[k] for r in rs]) for k in ("inf", "sym")}}
            v = widths[str(w)]
            rows.append(f"| {name.replace(',', ', ')} | {w} | {v['std']:.4f} | {said(v['inf>sym'])} | "
                        f"{said(v['sym>0.5'])} | {said(v['fit'])} | {v['inf']['mean']:.2f} / {v['sym']['mean']:.2f} |")
        # the slope of each seed over every width (a seed with runs at some widths only would fit its own
        # range), and the mean RD of each width over those seeds
        seed_of = {p: cfg["seed"] for p, cfg in config.items()}
        width_of = {p: cfg["d_model"] for p, cfg in config.items()}
        full = {s for s in seed_of.values() if {width_of[p] for p in paths if seed_of[p] == s} == set(by_width)}
        kept = [p for p in paths if seed_of[p] in full]
        rd: dict = {}
        for p in kept:
            for r in probe.regime(p, step=steps):
                for g, v in r.groups.items():
                    rd.setdefault(str(r.step), {}).setdefault(g, {}).setdefault(str(width_of[p]), []).append(v)
        rd = {st: {g: {w: finite(float(sum(v) / len(v))) for w, v in ws.items()} for g, ws in gs.items()}
              for st, gs in rd.items()}
        slopes = {}
        for r in probe.regime_widths([str(p) for p in kept], step=steps):
            slopes[str(r.step)] = {g: {"mean": finite(s["mean"]), "ci95": [finite(s["ci_lo"]), finite(s["ci_hi"])],
                                       "n": s["n"], "regime": s["regime"]}
                                   for g, s in r.slopes.items() if g in MATRIX_GROUPS}
        values[name] = {"widths": widths, "slopes": slopes, "rd": rd, "slope_seeds": sorted(full)}
    if not values:
        fail(f"{', '.join(roots)}: no cell with runs of two widths or more")
    table = "\n".join(["| cell | d_model | init std | inferential > symmetric | symmetric > 0.5 | fit train "
                       "| mean inf / sym |", "|---|---|---|---|---|---|---|", *rows])
    print(table)
    if out:
        write(out, {**values, "table": table}, seeds, trained_at, runs=runs)


if __name__ == "__main__":
    import warnings

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("roots", nargs="*", default=["sweeps/p2-width"], metavar="ROOT",
                    help="the sweeps' folders [default: sweeps/p2-width]")
    ap.add_argument("-o", "--out", help="also write the numbers as a docs results file (JSON)")
    ap.add_argument("--steps", default=STEPS, help=f"the steps of the RD slopes [default: {STEPS}]")
    ap.add_argument("--commit", help="the commit the runs were trained at [default: git here]")
    a = ap.parse_args()
    warnings.showwarning = lambda message, *_: print(f"warning: {message}", file=sys.stderr)
    try:
        main(a.roots, a.out, a.steps, a.commit)
    except probe.ProbeError as exc:
        fail(str(exc))
