"""Torch threads on a busy machine: training and `probe ood --step all` with each thread setting,
with and without a competing CPU-bound process, variants alternated in one run.

    python bench/bench_threads.py [--steps 300] [--repeats 2] [--variants 1 2 auto]

Every variant runs as a fresh ``probe-train`` / ``probe ood`` process (thread pools and OpenMP's
wait policy are fixed when torch loads). The competing load is one process spinning in a tight
loop per ``--load`` (default 1: half of a 2-core machine), started before and stopped after each
timing. Baseline: 1 thread.

Variants (set through the PROBE_THREADS environment variable, which both commands read): ``1`` /
``2`` / ``N``: that many torch threads; ``default``: torch's own choice (every core, OpenMP's
spinning wait); ``auto``: the toolkit's default (``--threads 0``).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import machine  # noqa: E402

BIN = Path(sys.executable).parent


def spinner() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


def timed(cmd: list[str], env: dict, load: int) -> float:
    procs = [spinner() for _ in range(load)]
    try:
        time.sleep(0.3)   # the load is running before the clock starts
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return time.perf_counter() - t0
    finally:
        for p in procs:
            p.kill()
            p.wait()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--repeats", type=int, default=2, help="timings per variant and load (best kept)")
    ap.add_argument("--load", type=int, default=1, help="competing spinning processes")
    ap.add_argument("--variants", nargs="+", default=["1", "default", "auto"],
                    help="1, 2, ...: that many threads (PROBE_THREADS); default: torch's own; auto: the toolkit's")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        run = Path(d) / "ood.h5"
        subprocess.run([str(BIN / "probe-train"), "--preset", "quick", "--steps", "1000", "--snapshot-every", "10",
                        "--threads", "1", "--quiet", "--out", run], check=True, stdout=subprocess.DEVNULL)
        train = [str(BIN / "probe-train"), "--preset", "quick", "--steps", str(args.steps), "--quiet",
                 "--overwrite", "--out", str(Path(d) / "t.h5"), "--threads", "0"]
        jobs = {
            "train": train,
            "train-wide": train + ["--d-model", "256", "--d-ff", "1024", "--batch-size", "512", "--steps",
                                   str(max(1, args.steps // 6))],
            "ood": [str(BIN / "probe"), "ood", str(run), "--step", "all", "--format", "csv"],
        }
        best: dict[tuple, float] = {}
        for _ in range(args.repeats):
            for load in (0, args.load):
                for job, cmd in jobs.items():
                    for v in args.variants:
                        env = dict(os.environ)
                        for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OMP_WAIT_POLICY", "PROBE_THREADS"):
                            env.pop(k, None)
                        if v == "default":
                            env["PROBE_THREADS"] = "torch"       # the toolkit leaves torch's choice alone
                        elif v != "auto":
                            env["PROBE_THREADS"] = v
                        t = timed(cmd, env, load)
                        key = (job, load, v)
                        best[key] = min(best.get(key, float("inf")), t)
    print(f"machine: {machine()}; train: {args.steps} quick steps; train-wide: {max(1, args.steps // 6)} steps "
          "at d_model 256, d_ff 1024, batch 512; ood: --step all on a 101-snapshot quick run; "
          "each time includes the process start")
    print(f"{'job':<10} {'load':>4}  " + "  ".join(f"{v:>14}" for v in args.variants))
    for job in jobs:
        for load in (0, args.load):
            base = best[(job, load, "1")] if "1" in args.variants else None
            cells = []
            for v in args.variants:
                t = best[(job, load, v)]
                cells.append(f"{t:6.2f} s" + (f" x{base / t:4.2f}" if base else ""))
            print(f"{job:<10} {load:>4}  " + "  ".join(f"{c:>14}" for c in cells))
    print("x: speed relative to 1 thread (the baseline) under the same load; best of", args.repeats)


if __name__ == "__main__":
    main()
