"""The test suite's wall time, this checkout against an older one, alternating in one script.

    python bench/bench_suite.py OLD_CHECKOUT [--rounds 1] [--new NEW_CHECKOUT]

Each checkout runs its own suite (the README's test command without the install: ``python -m pytest
-q`` with the project's default options) under its own virtual environment, ``CHECKOUT/.venv``, in
which that checkout is installed editable. The order flips each round, so a machine that grows busier
during the script weighs on both; on a shared machine only such pairs compare. Prints one line per
run and new/old per round.
"""
from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _util import machine  # noqa: E402


def suite(checkout: Path) -> tuple[float, str]:
    """(wall seconds, pytest's summary line) of one run of CHECKOUT's suite."""
    t0 = time.perf_counter()
    done = subprocess.run([str(checkout / ".venv/bin/python"), "-m", "pytest", "-q", "-p", "no:cacheprovider"],
                          cwd=checkout, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    summary = [ln for ln in done.stdout.splitlines() if re.search(r"\d+ (passed|failed)", ln)]
    return wall, (summary[-1].strip("= ") if summary else f"exit {done.returncode}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old", type=Path)
    ap.add_argument("--new", type=Path, default=Path(__file__).resolve().parent.parent)
    ap.add_argument("--rounds", type=int, default=1)
    a = ap.parse_args()
    print(f"machine: {machine()}")
    ratios = []
    for r in range(a.rounds):
        order = [("new", a.new), ("old", a.old)] if r % 2 == 0 else [("old", a.old), ("new", a.new)]
        times = {}
        for name, checkout in order:
            load = Path("/proc/loadavg").read_text().split()[0]
            times[name], summary = suite(checkout)
            print(f"round {r + 1} {name}: {times[name]:.1f} s ({summary}; load {load})", flush=True)
        ratios.append(times["new"] / times["old"])
        print(f"round {r + 1} new/old: {ratios[-1]:.3f}", flush=True)
    print(f"median new/old over {len(ratios)} round(s): {statistics.median(ratios):.3f}")


if __name__ == "__main__":
    main()
