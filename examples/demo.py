"""The main job: train gamma = 0.3 and 0.8 on the CPU, then probe them.

    python examples/demo.py [--out demo-out] [--steps N] [--retrain]

Both runs train at once, one CPU thread each, through the real ``probe-train``
CLI (:mod:`probe_train.runs`: finished runs are reused, killed ones resumed); the probes
go through the Python API. Prints the accuracy table and the
similarity numbers, writes heat maps, and says whether the paper-1 effect shows. Every number it
prints goes to ``OUT/results.json`` too, with the date, the machine, the commit and the seed: the docs
quote the demo from a copy of that file (``docs/results/demo.json``, inserted when the site is built).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from _results import commit, machine   # examples/_results.py, beside this script

import probe
from probe.errors import run_cli
from probe.chart import plot_results
from probe_train.runs import ensure

GAMMAS = (0.3, 0.8)


def train_all(out: Path, steps: int, retrain: bool) -> dict[float, Path]:
    wanted = {f"quick-g{g}": ("quick", {"gamma": g, "steps": steps}) for g in GAMMAS}
    paths = ensure(wanted, out, jobs=len(GAMMAS), retrain=retrain)
    return {g: paths[f"quick-g{g}"] for g in GAMMAS}


def write_results(path: Path, values: dict, seconds: float | None) -> None:
    """The demo's numbers with what they were measured on; written whole (a temporary file renamed)."""
    meta = {"command": "python examples/demo.py " + " ".join(sys.argv[1:]),
            "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"), "machine": machine(), "commit": commit(),
            "seeds": [0], "train_seconds": None if seconds is None else round(seconds, 1),
            "load_average_5min": round(os.getloadavg()[1], 1)}   # a shared machine's time means little alone
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"meta": meta, "values": values}, indent=1) + "\n")
    os.replace(tmp, path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="demo-out", help="folder for runs and heat maps")
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--early-step", type=int, default=250, help="early snapshot shown beside the last")
    ap.add_argument("--retrain", action="store_true", help="train even if finished runs exist")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    before = {p: p.stat().st_mtime_ns for p in out.glob("*.h5")}
    t0 = time.perf_counter()
    paths = train_all(out, args.steps, args.retrain)
    # the training time only when both runs trained here from the start: a reused or resumed run says
    # nothing of it
    fresh = not any(p in before for p in paths.values())
    seconds = time.perf_counter() - t0 if fresh else None

    print("\nfinal accuracy (held-out = rsn_test: anchor pairs (11,13), (13,11) never trained)")
    print(f"{'gamma':>6}  {'mem':>6}  {'rsn_train':>9}  {'rsn_test':>8}")
    acc = {}
    for g, path in paths.items():
        m = probe.info(path)["metrics"]
        acc[g] = {s: m[s]["acc"] for s in ("mem", "rsn_train", "rsn_test")}
        print(f"{g:>6}  {acc[g]['mem']:>6.3f}  {acc[g]['rsn_train']:>9.3f}  {acc[g]['rsn_test']:>8.3f}")

    print(f"\ncosine similarity of token embeddings, early (step {args.early_step}) and last step")
    print(f"{'gamma':>6}  {'tokens':<10} {'step':>5} {'mean':>6} {'std':>6} {'rho(|i-j|)':>10} {'d=1':>6} {'d=9':>6}")
    sims = {}
    for g, path in paths.items():
        for group in ("reasoning", "memory"):
            early, last = probe.similarity(path, group, step=f"{args.early_step}:{args.early_step + 1}")[0], \
                probe.similarity(path, group)[0]
            sims[g, group] = (early, last)
            for r in (early, last):
                print(f"{g:>6}  {group:<10} {r.step:>5} {r.mean_offdiag:>6.2f} {r.std_offdiag:>6.2f} "
                      f"{r.distance_corr:>10.2f} {r.by_distance[1]:>6.2f} {r.by_distance[9]:>6.2f}")
            png = out / f"similarity_gamma{g}_{group}.png"
            plot_results("similarity", [early, last], str(png), f"gamma={g}: {group} anchors")
            print(f"{'':>6}  heat map: {png}")

    small, large = 0.8, 0.3
    mem_early, mem_last = sims[small, "memory"]
    checks = [
        ("rsn_test accuracy: gamma 0.8 far above gamma 0.3",
         acc[small]["rsn_test"] > acc[large]["rsn_test"] + 0.3),
        ("reasoning anchors at gamma 0.8 form a band (similarity falls with |i-j|, rho < -0.7)",
         sims[small, "reasoning"][1].distance_corr < -0.7),
        ("memory anchors at gamma 0.8 are uniformly similar early (mean > 0.2, |rho| < 0.3) and never ordered",
         mem_early.mean_offdiag > 0.2 and abs(mem_early.distance_corr) < 0.3 and abs(mem_last.distance_corr) < 0.3),
    ]
    values = {f"g{g}": {"acc": acc[g], **{group: {
        when: {"step": r.step, "mean": r.mean_offdiag, "std": r.std_offdiag, "rho": r.distance_corr,
               "d1": r.by_distance[1], "d9": r.by_distance[9]} for when, r in zip(("early", "last"), sims[g, group])}
        for group in ("reasoning", "memory")}} for g in GAMMAS}
    write_results(out / "results.json", values, seconds)
    print()
    for text, ok in checks:
        print(f"[{'ok' if ok else 'NOT SHOWN'}] {text}")
    from probe.report import report

    page = out / "report.html"
    report([str(paths[large]), str(paths[small])], str(page),
           probes=["similarity", "pca", "align", "condense", "theory", "attention", "bias"], max_steps=4)
    print(f"\nthe two runs side by side: {page} (open it in a browser; probe report adds every other probe)")
    print(f"explore: probe similarity {paths[small]} --tokens reasoning --step all")
    if not all(ok for _, ok in checks):
        sys.exit(1)


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    run_cli(main)  # bad input (e.g. an --early-step with no snapshot) ends in one "Error:" line
