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


def ci(values) -> dict:
    """{"mean", "ci95", "n", "values"}: the mean over seeds with its 95 % bootstrap interval (a page inserts it
    with the ``ci`` format)."""
    d = describe(values)
    return {"mean": finite(d["mean"]), "ci95": [finite(d["ci_lo"]), finite(d["ci_hi"])], "n": d["n"],
            "values": [finite(float(v)) for v in values]}


def frac(flags) -> dict:
    """{"shown": "k/n", "ci95"}: the seeds with an outcome and its Wilson interval (the ``frac`` format)."""
    p = proportion(flags)
    return {"shown": f"{p['k']}/{p['n']}", "fraction": finite(p["fraction"]),
            "ci95": [finite(p["ci_lo"]), finite(p["ci_hi"])]}


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


def write(out: str, values: dict, seeds, trained_at: str | None = None, **more) -> None:
    """``{"meta", "values"}`` to ``out``, whole or not at all (a stopped script leaves the old file);
    ``trained_at``: the commit the runs were trained at (default: this checkout's)."""
    meta = {"command": shlex.join(["python", f"examples/{Path(sys.argv[0]).name}", *sys.argv[1:]]),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "machine": machine(), "commit": trained_at or commit(), "seeds": sorted(seeds), **more}
    tmp = Path(out).with_suffix(".tmp")
    tmp.write_text(json.dumps({"meta": meta, "values": values}, indent=1, ensure_ascii=False, allow_nan=False) + "\n")
    tmp.replace(out)
    print(f"wrote {out}", file=sys.stderr)
