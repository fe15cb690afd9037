"""`probe figures --all --quick` from an empty folder: the whole command's wall time, each run's time,
each figure's drawing time and, per figure, the effect it states with the fraction of seeds that show it.

    python bench/bench_figures.py [--size quick] [--repeats 2] [--out DIR] [--jobs 0] [--baseline COMMAND]

Each repeat starts from an empty folder and runs the installed ``probe`` exactly as a user would
(``probe figures --all --quick -o DIR``); its stderr lines are timestamped as they arrive. The baseline
is the goal itself (10 minutes) and the estimate ``probe figures --dry-run`` gives for the same call
beforehand (each preset's speed, measured on this machine: train/speeds.py): the script prints
measured / estimated. ``--baseline COMMAND`` (another checkout's ``probe``, e.g. ``env
PYTHONPATH=... /path/to/old/probe``) runs that command too in every repeat, the two alternating (the
order flips each repeat), and prints this one's time / the baseline's per repeat: on a shared machine
only such pairs compare. After the last repeat, ``probe figures --all --quick --check`` (every run
reused) gives the claims. Prints markdown tables for bench/RESULTS.md and docs/figures.md.
"""
from __future__ import annotations

import argparse
import json
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _util import machine  # noqa: E402


def probe(*args: str) -> list[str]:
    exe = Path(sys.executable).with_name("probe")
    return [str(exe), *args]


def timed_run(cmd: list[str]) -> tuple[float, list[tuple[float, str]], int]:
    """(wall seconds, [(seconds since start, stderr line)], exit code)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines = [(time.perf_counter() - t0, ln.rstrip("\n")) for ln in proc.stderr]
    proc.wait()
    return time.perf_counter() - t0, lines, proc.returncode


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="quick", choices=["tiny", "quick"])
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--out", default="bench-figures")
    ap.add_argument("--jobs", default="0")
    ap.add_argument("--baseline", help="another probe command to alternate with this one's")
    a = ap.parse_args()
    root = Path(a.out)
    print(f"# {machine()}; probe figures --all --{a.size} --jobs {a.jobs}, from an empty folder", flush=True)
    if a.baseline:
        ratios = []
        for k in range(a.repeats):
            took = {}
            for which in ("this", "baseline") if k % 2 == 0 else ("baseline", "this"):
                out = root / f"{which}{k}"
                shutil.rmtree(out, ignore_errors=True)
                cmd = [*(shlex.split(a.baseline) if which == "baseline" else probe()), "figures", "--all",
                       f"--{a.size}", "--jobs", a.jobs, "-o", str(out)]
                took[which], lines, code = timed_run(cmd)
                if code:
                    sys.exit(f"{which}: probe figures exited {code}:\n" + "\n".join(ln for _, ln in lines[-20:]))
                print(f"repeat {k} {which}: {took[which]:.1f} s", flush=True)
            ratios.append(took["this"] / took["baseline"])
            print(f"repeat {k}: this / baseline = {ratios[-1]:.3f}", flush=True)
        print(f"\nthis / baseline: median {statistics.median(ratios):.3f}, "
              f"{', '.join(f'{r:.3f}' for r in ratios)}")
        return
    walls, last = [], None
    for k in range(a.repeats):
        out = root / f"r{k}"
        shutil.rmtree(out, ignore_errors=True)
        plan = json.loads(subprocess.run(probe("figures", "--all", f"--{a.size}", "--jobs", a.jobs, "-o", str(out),
                                               "--dry-run", "-f", "json"),
                                         capture_output=True, text=True, check=True).stdout)
        wall, lines, code = timed_run(probe("figures", "--all", f"--{a.size}", "--jobs", a.jobs, "-o", str(out)))
        if code:
            sys.exit(f"probe figures exited {code}:\n" + "\n".join(ln for _, ln in lines[-20:]))
        walls.append(wall)
        last = (out, plan, lines)
        trained = [ln for _, ln in lines if re.match(r"\s+done ", ln)]
        t_train = max((t for t, ln in lines if re.match(r"trained \d+ run", ln)), default=0.0)
        est = (f"estimated beforehand {plan['seconds']:.1f} s (measured / estimated {wall / plan['seconds']:.2f})"
               if plan["seconds"] else "no estimate (presets not measured)")
        print(f"repeat {k}: {wall:.1f} s wall ({wall / 60:.2f} min), training done at {t_train:.1f} s, "
              f"{len(trained)} runs; {est}", flush=True)
    print(f"\nmedian of {len(walls)}: {statistics.median(walls):.1f} s = {statistics.median(walls) / 60:.2f} min "
          f"(goal 600 s: {statistics.median(walls) / 600:.2f} of it)")

    out, plan, lines = last
    run_s = {m.group(1): float(m.group(2)) for _, ln in lines if (m := re.match(r"\s+done (\S+) in ([\d.]+) s", ln))}
    draw_s = {m.group(1): float(m.group(2)) for _, ln in lines
              if (m := re.match(r"figure (\S+) drawn in ([\d.]+) s", ln))}
    by_fig: dict[str, list[dict]] = {}
    for r in plan["runs"]:
        by_fig.setdefault(r["figure"], []).append(r)
    print("\n| figure | runs (shared with other figures counted in each) | its runs' training, s (each run's own time) "
          "| drawing, s |")
    print("|---|---|---|---|")
    for fig, rows in by_fig.items():
        times = [run_s.get(r["run"]) for r in rows]
        shown = " + ".join(f"{t:.0f}" for t in times if t is not None)
        print(f"| {fig} | {len(rows)} | {sum(t for t in times if t is not None):.0f} ({shown}) | "
              f"{draw_s.get(fig, float('nan')):.1f} |")
    print(f"\nruns trained: {len(run_s)}, their summed time {sum(run_s.values()):.0f} s on {a.jobs or 'all'} job slots")

    res = subprocess.run(probe("figures", "--all", f"--{a.size}", "-o", str(out), "--check", "-f", "json"),
                         capture_output=True, text=True)
    if res.returncode:
        sys.exit(f"--check failed: {res.stderr[-2000:]}")
    claims = json.loads(res.stdout)
    print("\n| figure | claim | seeds showing it | values |")
    print("|---|---|---|---|")
    for fig, cs in claims.items():
        for c in cs:
            vals = ", ".join(f"{v:.3g}" for v in c["values"])
            print(f"| {fig} | {c['claim']} | {c['k']}/{c['n']} [{c['ci_lo']:.2f}, {c['ci_hi']:.2f}] | {vals} |")


if __name__ == "__main__":
    main()
