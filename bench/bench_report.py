"""The cost of a live run report to training: ``probe-train --report PAGE`` against the same
``probe-train`` without it (the baseline), alternating, in one run.

    python bench/bench_report.py [--preset quick] [--steps 3000] [--repeats 2] [--threads 0]

Each variant is a real ``probe-train`` process. The number compared is the training time the
trainer itself reports ("in X s": the loop with its snapshots, the report process running beside it);
the wall time of the whole command, which with ``--report`` includes writing the last page after
training, is shown too. Goal (issue 15): training at most 3 % slower with the report on. Besides the medians, the overhead
of each back-to-back pair and their mean with a 95 % t-interval (the machine drifts by more than 3 %
between runs).
"""
from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import machine  # noqa: E402
from probe.children import entry_command  # noqa: E402


def train(folder: Path, preset: str, steps: int, threads: int, report: bool, i: int) -> tuple[float, float, int]:
    out = folder / f"run-{i}-{int(report)}.h5"
    page = folder / f"page-{i}.html"
    cmd = [*entry_command("probe-train"), "--preset", preset, "--steps", str(steps), "--out", str(out), "--quiet",
           "--threads", str(threads)] + (["--report", str(page)] if report else [])
    t0 = time.perf_counter()
    res = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if res.returncode != 0:
        raise SystemExit(res.stderr)
    m = re.search(r"(\d+) snapshots, \d+ steps in ([\d.]+) s", res.stderr)
    if report:   # the last page is there and no longer live
        text = page.read_text()
        assert text.rstrip().endswith("</html>") and "<meta name='probe-live'" not in text
    return float(m.group(2)), wall, int(m.group(1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="quick")
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--threads", type=int, default=0, help="trainer torch threads (0: one per core)")
    args = ap.parse_args()
    print(f"machine: {machine()}")
    print(f"probe-train --preset {args.preset} --steps {args.steps} --threads {args.threads}, "
          f"{args.repeats} repeats, variants alternating")
    times: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeats):
            for report in (False, True) if i % 2 == 0 else (True, False):
                t, wall, snaps = train(Path(tmp), args.preset, args.steps, args.threads, report, i)
                times[report].append((t, wall))
                print(f"  repeat {i}: {'--report' if report else 'baseline'}: training {t:.1f} s, "
                      f"command {wall:.1f} s, {snaps} snapshots", flush=True)
    base = statistics.median(t for t, _ in times[False])
    live = statistics.median(t for t, _ in times[True])
    base_w = statistics.median(w for _, w in times[False])
    live_w = statistics.median(w for _, w in times[True])
    print(f"training time, median: baseline {base:.2f} s, --report {live:.2f} s: "
          f"{100 * (live / base - 1):+.1f} % (goal <= +3 %)")
    # the same repeat's two runs ran back to back: their ratio cancels most of the machine's drift
    pairs = [100 * (r[0] / b[0] - 1) for b, r in zip(times[False], times[True])]
    mean = statistics.fmean(pairs)
    if len(pairs) > 1:
        from scipy import stats

        half = stats.t.ppf(0.975, len(pairs) - 1) * statistics.stdev(pairs) / len(pairs) ** 0.5
        print(f"per pair: {', '.join(f'{p:+.1f} %' for p in pairs)}; mean {mean:+.1f} % "
              f"[95 % interval {mean - half:+.1f}, {mean + half:+.1f}]")
    print(f"whole command, median: baseline {base_w:.2f} s, --report {live_w:.2f} s "
          f"(the last page is written after training)")


if __name__ == "__main__":
    main()
