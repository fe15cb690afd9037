"""What the example scripts that measure write for the docs: a results file (``docs/results/NAME.json``,
whose numbers docs/hooks.py inserts into the pages) holding ``values`` and ``meta``, what they were
measured on (command, date, machine, commit, seeds). CONTRIBUTING.md, "Quoting a measured number".
"""
from __future__ import annotations

import datetime
import json
import math
import os
import platform
import shlex
import subprocess
import sys
from pathlib import Path

from probe.analyses.uncertainty import describe, proportion


def fail(message: str) -> None:
    """The toolkit's rule for bad input: one line on stderr, exit 2, no traceback."""
    print(f"Error: {message}", file=sys.stderr)
    sys.exit(2)


def finite(x: float) -> float | None:
    return x if math.isfinite(x) else None   # strict JSON: an interval of one seed is null, not NaN


def mean_entry(s: dict) -> dict:
    """A mean over seeds (``{"mean", "ci_lo", "ci_hi", "n"}``, as describe() and sweep_summary give it) as a
    page's ``ci`` entry: ``{"mean", "ci95", "n"}``."""
    return {"mean": finite(s["mean"]), "ci95": [finite(s["ci_lo"]), finite(s["ci_hi"])], "n": s["n"]}


def count_entry(s: dict) -> dict:
    """Seeds with an outcome (``{"k", "n", "ci_lo", "ci_hi"}``, as proportion(), sweep_summary and probe
    figures --check give it) as a page's ``frac`` entry: ``{"shown": "k/n", "ci95"}``."""
    return {"shown": f"{s['k']}/{s['n']}", "ci95": [finite(s["ci_lo"]), finite(s["ci_hi"])]}


def ci(values) -> dict:
    """{"mean", "ci95", "n", "values"}: the mean over seeds with its 95 % bootstrap interval (a page inserts it
    with the ``ci`` format)."""
    return {**mean_entry(describe(values)), "values": [finite(float(v)) for v in values]}


def frac(flags) -> dict:
    """{"shown": "k/n", "ci95", "fraction"}: the seeds with an outcome and its Wilson interval (the ``frac``
    format)."""
    p = proportion(flags)
    return {**count_entry(p), "fraction": finite(p["fraction"])}


def machine() -> str:
    """The machine in words: its GPU where there is one (the runs trained there), its cores and CPU."""
    try:
        gpu = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=30, check=True).stdout.strip().splitlines()
    except (OSError, subprocess.SubprocessError):
        gpu = []
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor() or "unknown CPU")
    where = f"{gpu[0]} (runs trained on the GPU), " if gpu else ""
    return f"{where}{os.cpu_count()} cores ({cpu}), Python {platform.python_version()}"


def commit() -> str:
    """The checkout's commit (short), or "unknown" outside a git clone."""
    p = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=Path(__file__).resolve().parent,
                       capture_output=True, text=True)
    return p.stdout.strip() if p.returncode == 0 and p.stdout.strip() else "unknown"


def trained(runs) -> dict:
    """What the run files say they trained with: ``{"commits", "devices"}``, each value once (a run file
    records its toolkit commit and device; files trained before it did add nothing)."""
    import probe

    envs = [probe.info(r).get("environment") or {} for r in runs]
    return {"commits": sorted({e["commit"] for e in envs if e.get("commit")}),
            "devices": sorted({e["device_name"] for e in envs if e.get("device_name")})}


def write(out: str, values: dict, seeds, trained_at: str | None = None, runs=None, **more) -> None:
    """``{"meta", "values"}`` to ``out``, whole or not at all (a stopped script leaves the old file);
    ``trained_at``: the commit the runs were trained at (default: this checkout's); ``runs``: the run
    files, whose recorded commits and devices go into ``meta["trained"]`` (docs/hooks.py says them)."""
    meta = {"command": shlex.join(["python", f"examples/{Path(sys.argv[0]).name}", *sys.argv[1:]]),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "machine": machine(), "commit": trained_at or commit(), "seeds": sorted(seeds), **more}
    if runs is not None:
        meta["trained"] = trained(runs)
    tmp = Path(out).with_suffix(".tmp")
    tmp.write_text(json.dumps({"meta": meta, "values": values}, indent=1, ensure_ascii=False, allow_nan=False) + "\n")
    tmp.replace(out)
    print(f"wrote {out}", file=sys.stderr)
