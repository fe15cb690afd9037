"""Seed ensembles on the CPU: a 5-seed sweep trained as seed ensembles (the default, one ensemble per
core) against the same sweep one run per process (``--no-ensemble``, the baseline), alternated in one
script; every timing a fresh ``probe-train sweep`` into a new folder (nothing reused).

    python bench/bench_ensemble.py [--preset quick] [--seeds 5] [--steps 3000] [--jobs 2] [--rounds 2]

Prints each timing and the ratio ensembled / one-by-one per round and their median (below 1: the
ensembles are faster). The goal on a CPU (issue 46): not slower.

On a GPU, ``--in-process`` times training in this process instead: one run of ``--preset`` alone, then
``--members`` runs (seeds 0..N-1) as one ensemble, the same ``--steps`` each (snapshots only at the
first and last step), and prints runs per minute of each and their ratio (the goal on a GPU: 20
members of composite-quick at least 5x the runs per minute of one run at a time):

    python bench/bench_ensemble.py --in-process --preset composite-quick --members 20 --steps 300
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import machine  # noqa: E402

BIN = Path(sys.executable).parent


def timed(args: list[str]) -> float:
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        subprocess.run([str(BIN / "probe-train"), "sweep", *args, "-o", d], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return time.perf_counter() - t0


def in_process(a) -> None:
    """One run alone, then ``a.members`` as one ensemble: runs per minute of each, and the ratio."""
    from probe.format import Run
    from probe_train import Trainer, preset
    from probe_train.ensemble import Ensemble

    cfgs = [preset(a.preset, seed=s, steps=a.steps, snapshot_every=0, snapshot_log=False) for s in range(a.members)]
    with tempfile.TemporaryDirectory() as d:
        alone = Trainer(cfgs[0], Path(d) / "alone.h5", show_progress=False).run()
        ens = Ensemble(cfgs, [Path(d) / f"m{k}.h5" for k in range(a.members)], show_progress=False).run()
        with Run(Path(d) / "m0.h5") as run:
            env = run.environment
    per_min = {"alone": 60 / alone.seconds, "ensemble": 60 * a.members / ens.seconds}
    print(f"{a.preset}, {a.steps} steps on {env['device']} ({env['precision']} matmuls): one run alone "
          f"{alone.seconds:.1f} s ({per_min['alone']:.2f} runs/min); {a.members} as one ensemble {ens.seconds:.1f} s "
          f"({per_min['ensemble']:.2f} runs/min); ratio {per_min['ensemble'] / per_min['alone']:.2f}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", default="quick")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=0, help="the preset's steps when 0")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--in-process", action="store_true", help="time one run and one ensemble in this process")
    ap.add_argument("--members", type=int, default=20, help="with --in-process: the ensemble's runs")
    a = ap.parse_args()
    if a.in_process:
        print(f"machine: {machine()}")
        return in_process(a)
    grid = ["--preset", a.preset, "--grid", f"seed=0:{a.seeds}", "-j", str(a.jobs)]
    if a.steps:
        grid += ["--grid", f"steps={a.steps}"]
    print(f"machine: {machine()}")
    print(f"probe-train sweep {' '.join(grid)}: ensembled (default) vs --no-ensemble (baseline)")
    ratios = []
    for r in range(a.rounds):
        # alternate which goes first, so that a drift in the machine's load favours neither
        order = [("ensembled", []), ("one-by-one", ["--no-ensemble"])]
        times = {name: timed(grid + extra) for name, extra in (order if r % 2 == 0 else order[::-1])}
        ratios.append(times["ensembled"] / times["one-by-one"])
        print(f"round {r + 1}: ensembled {times['ensembled']:.1f} s, one-by-one {times['one-by-one']:.1f} s, "
              f"ratio {ratios[-1]:.3f}", flush=True)
    print(f"median ratio ensembled / one-by-one: {statistics.median(ratios):.3f} over {a.rounds} round(s)")


if __name__ == "__main__":
    main()
