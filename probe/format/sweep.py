"""The sweep manifest ``sweep.json``: the one contract between ``probe-train sweep`` (which writes
it) and ``probe sweep-summary`` (which reads it).

    {"preset": "anchor",
     "grid": {"gamma": [0.3, 0.8], "seed": [0, 1, 2]},
     "runs": [{"label": "gamma0.3-seed0", "point": {"gamma": 0.3, "seed": 0},
               "path": "gamma0.3-seed0-1a2b3c4d5e.h5", "status": "done"}, ...]}

``path`` is relative to the manifest's folder. ``status`` is ``done`` (every step written),
``partial`` (stopped; resumable), ``missing`` (never started) or ``failed`` (with ``error``: the
trainer's last error line).
"""
from __future__ import annotations

import json
import os

from ..files import open_regular, write_atomic
from ..limits import load_json
from ..errors import ProbeError

MANIFEST = "sweep.json"
STATUSES = ("done", "partial", "missing", "failed")


def write_manifest(folder: str | os.PathLike, preset: str, grid: dict, runs: list[dict]) -> None:
    """Replace ``folder/sweep.json`` with the sweep's preset, grid and runs (each: label, point, path,
    status, and error for a failed run), atomically: a reader sees the old manifest or the new one."""
    for r in runs:
        if r.get("status") not in STATUSES:
            raise ValueError(f"run {r.get('label')}: status {r.get('status')!r} is not one of {STATUSES}")
    text = json.dumps({"preset": preset, "grid": dict(grid), "runs": runs}, indent=1) + "\n"
    write_atomic(os.path.join(os.fspath(folder), MANIFEST), text, "sweep manifest")


def read_manifest(path: str | os.PathLike) -> tuple[str, dict]:
    """(the sweep's folder, its manifest) for a sweep folder or its ``sweep.json``; a ProbeError when
    there is none or it is not one."""
    path = os.fspath(path)
    file = os.path.join(path, MANIFEST) if os.path.isdir(path) else path
    missing = f"{path}: no sweep manifest ({MANIFEST}); make one with probe-train sweep --out DIR"
    if not os.path.exists(file):
        raise ProbeError(missing)
    try:
        with open_regular(file, what="sweep manifest") as fh:
            manifest = load_json(fh, file, "sweep manifest")
        manifest["runs"], manifest["grid"]
    except (OSError, ValueError, KeyError, TypeError):
        raise ProbeError(f"{file}: not a sweep manifest written by probe-train sweep") from None
    return os.path.dirname(os.path.abspath(file)), manifest
