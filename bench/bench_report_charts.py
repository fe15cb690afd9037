"""A report's step figure: the inline SVG chart (``probe.report.charts.step_figure``) against the
matplotlib PNG the report drew before (``probe.chart.plot_results`` at 80 dpi, the baseline),
alternating, on the same results.

    python bench/bench_report_charts.py RUN.h5 [--repeats 3]
    python bench/bench_report_charts.py --train [--steps 3000]      # a quick run at γ 0.8 first

For each probe of the demo's report, every stored snapshot's result is computed once; then each
repeat draws all of them both ways (the order flips each repeat) and the medians per figure are
compared. This is what lets the report's step slider reach every snapshot: the report draws
(snapshots x probes x runs) figures.
"""
from __future__ import annotations

import argparse
import io
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import machine  # noqa: E402

PROBES = ("similarity", "pca", "align", "condense", "theory", "attention")   # examples/demo.py's, with a figure


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", nargs="?")
    ap.add_argument("--train", action="store_true", help="train a quick run at γ 0.8 first")
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    if not args.run and not args.train:
        ap.error("give a run file, or --train")
    import probe
    from probe.chart import plot_results
    from probe import registry
    from probe.report import charts

    print(f"machine: {machine()}")
    with tempfile.TemporaryDirectory() as tmp:
        run = args.run
        if args.train:
            run = str(Path(tmp) / "run.h5")
            from probe.children import entry_command

            subprocess.run([*entry_command("probe-train"), "--preset", "quick", "--gamma", "0.8", "--steps",
                            str(args.steps), "--out", run, "--quiet"], check=True)
        results = {p: getattr(probe, p)(run, step="all") for p in PROBES}
        n = len(results[PROBES[0]])
        print(f"{run}: {n} snapshots; {len(PROBES)} probes; {args.repeats} repeats, variants alternating")
        svg_ms: dict[str, list[float]] = {p: [] for p in PROBES}
        png_ms: dict[str, list[float]] = {p: [] for p in PROBES}
        for i in range(args.repeats):
            for variant in (("svg", "png") if i % 2 == 0 else ("png", "svg")):
                for p in PROBES:
                    t0 = time.perf_counter()
                    for r in results[p]:
                        if variant == "svg":
                            charts.step_figure(registry.get(p), r, runs=2)
                        else:
                            plot_results(p, [r], io.BytesIO(), p, dpi=80)
                    per = (time.perf_counter() - t0) / len(results[p]) * 1000
                    (svg_ms if variant == "svg" else png_ms)[p].append(per)
    print(f"{'probe':<12} {'SVG ms/figure':>14} {'matplotlib ms/figure':>21} {'ratio':>7}")
    tot_s = tot_p = 0.0
    for p in PROBES:
        s, m = statistics.median(svg_ms[p]), statistics.median(png_ms[p])
        tot_s, tot_p = tot_s + s, tot_p + m
        print(f"{p:<12} {s:>14.1f} {m:>21.1f} {m / s:>6.0f}x")
    print(f"{'all six':<12} {tot_s:>14.1f} {tot_p:>21.1f} {tot_p / tot_s:>6.0f}x")
    print(f"a two-run report of these probes at every snapshot: {2 * n * tot_s / 1000:.1f} s of figures "
          f"(matplotlib: {2 * n * tot_p / 1000:.1f} s)")


if __name__ == "__main__":
    main()
