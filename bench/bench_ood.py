"""`probe ood --step all` on a run with about 100 snapshots: the batched path (one model, weights
swapped in, each tensor read once per block of snapshots, split inputs built once, snapshots
evaluated by a worker per core with one torch thread each; also with one worker) against the
previous one (baseline: a model built and every tensor read per snapshot, split inputs rebuilt per
snapshot), in one process, alternating; the results must be equal.

    python bench/bench_ood.py [RUN.h5] [--repeats 3]

Without RUN.h5 a `composite-quick` run with a snapshot every 40 steps (about 100 snapshots) is
trained first into a temporary folder (a few minutes on one core).
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
from probe.children import entry_command  # noqa: E402

import probe  # noqa: E402
from probe.analyses.ood import OODResult  # noqa: E402
from probe.probes.ood import _ood_one  # noqa: E402
from probe_train import evaluate as E  # noqa: E402


def baseline(path) -> list[OODResult]:
    """What probe.ood did before: a model rebuilt and read tensor by tensor, and the split inputs
    rebuilt, for every snapshot (the per-snapshot evaluation is probe.ood's own)."""
    with probe.Run(path) as run:
        cfg, task = E.run_config(run), E.load_task(run)
        indices, steps = run.step_indices("all"), run.steps
        models = [E.load_model(run, i)[0] for i in indices]
    held_out = "rsn_test" if cfg.task == "anchor" else "ood_inferential"
    return [_ood_one(E, model, task, cfg, held_out, {s: E.split_inputs(task, s) for s in task.splits}, int(steps[i]))
            for model, i in zip(models, indices)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("run", nargs="?")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = args.run
        if path is None:
            path = str(Path(tmp) / "run.h5")
            subprocess.run([*entry_command("probe-train"), "--preset", "composite-quick", "--snapshot-every", "40",
                            "--quiet", "--out", path], check=True)
        with probe.Run(path) as run:
            n = run.n_snapshots
        times = {"baseline: per-snapshot rebuild": [], "probe.ood, threads=1": [], "probe.ood (default: a worker per core)": []}
        results = {}
        for r in range(args.repeats):
            order = list(times) if r % 2 == 0 else list(times)[::-1]
            for name in order:
                t = time.perf_counter()
                if name.startswith("baseline"):
                    res = baseline(path)
                else:
                    res = probe.ood(path, step="all", threads=1 if "threads=1" in name else 0)
                times[name].append(time.perf_counter() - t)
                results[name] = res
        ref = results["baseline: per-snapshot rebuild"]
        for name, ours in results.items():
            assert len(ours) == len(ref)
            for a, b in zip(ref, ours):
                assert a.step == b.step and a.splits == b.splits and a.combos == b.combos, \
                    f"{name}: results differ at step {a.step}"
        print(f"# {machine()}")
        print(f"# {path}: {n} snapshots; median of {args.repeats}, results equal")
        base = statistics.median(times["baseline: per-snapshot rebuild"])
        print("| path | median s | per snapshot ms | speed-up |")
        print("|---|---|---|---|")
        for name, ts in times.items():
            m = statistics.median(ts)
            print(f"| {name} | {m:.2f} | {1000 * m / n:.1f} | {base / m:.2f}× |")


if __name__ == "__main__":
    main()
