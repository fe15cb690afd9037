"""The figures' claims, checked per seed, as a docs results file: runs the installed ``probe figures ...
--check -f json`` with the arguments given after ``--`` and writes its claims with what they were measured
on (docs/hooks.py inserts them into the pages):

    python examples/figure_claims.py -o figures-quick.json -- p1-accuracy p2-ood --quick --jobs 2 -o figures

Per figure, a list of its claims as ``probe figures --check -f json`` prints them, each with ``shown``
(``k/n``) and ``ci95`` added for a page's ``frac`` format.
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

from _results import count_entry, fail, finite, write   # examples/_results.py, beside this script


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-o", "--out", required=True, help="the results file (JSON) to write")
    ap.add_argument("figures", nargs=argparse.REMAINDER, help="-- then probe figures' arguments")
    a = ap.parse_args()
    args = a.figures[1:] if a.figures[:1] == ["--"] else a.figures
    if not args:
        fail("give probe figures' arguments after --, e.g. -- p1-accuracy --quick -o figures")
    # the installed command of this interpreter's environment, else the one on the PATH
    beside = Path(sys.executable).parent / "probe"
    probe = str(beside) if beside.is_file() else shutil.which("probe")
    if probe is None:
        fail("the probe command is not installed here (pip install -e . in this environment)")
    res = subprocess.run([probe, "figures", *args, "--check", "-f", "json"], stdout=subprocess.PIPE, text=True)
    if res.returncode not in (0, 1):   # 1: a claim did not hold, which is a result too
        fail(f"probe figures exited {res.returncode}")
    claims = json.loads(res.stdout)
    seeds = set()
    for figure in claims.values():
        for c in figure:
            c["values"] = [finite(v) if isinstance(v, float) else v for v in c["values"]]   # strict JSON
            c.update(count_entry(c))
            seeds |= set(range(c["n"]))   # a figure draws seeds 0 .. n-1 (FigureContext: seed 0 is shared)
    write(a.out, claims, seeds)


if __name__ == "__main__":
    main()
