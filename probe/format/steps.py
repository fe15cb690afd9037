"""The step grammar every run shares, a snapshot file or a checkpoint (a run of one step): which
snapshots ``--step`` selects."""
from __future__ import annotations

import re

import numpy as np

from ..errors import ProbeError, param


def step_indices(spec: str | int, steps: np.ndarray, path: str) -> list[int]:
    """Indices into ``steps`` (the steps of a run's snapshots, in order) for ``latest``, ``all``, a step
    number, a ``A:B`` step range (half-open) or a comma list of these (``100,500,latest``; each
    snapshot once, in step order). ``path`` names the run in errors."""
    if len(steps) == 0:
        raise ProbeError(f"{path}: has no complete snapshot yet")
    spec = str(spec).strip()
    if "," in spec:
        parts = [p for p in spec.split(",") if p.strip()]
        if not parts:
            raise ProbeError(f"bad {param('step')} '{spec}': use latest, all, a step number or A:B")
        return sorted({i for p in parts for i in step_indices(p, steps, path)})
    if spec == "latest":
        return [len(steps) - 1]
    if spec == "all":
        return list(range(len(steps)))
    if re.fullmatch(r"-?\d*:-?\d*", spec):
        lo_s, hi_s = spec.split(":")
        lo = int(lo_s) if lo_s else None
        hi = int(hi_s) if hi_s else None
        idx = [i for i, s in enumerate(steps) if (lo is None or s >= lo) and (hi is None or s < hi)]
        if not idx:
            raise ProbeError(f"{path}: no snapshot with step in [{lo_s or 'start'}, {hi_s or 'end'})")
        return idx
    try:
        want = int(spec)
    except ValueError:
        raise ProbeError(f"bad {param('step')} '{spec}': use latest, all, a step number, A:B or a comma "
                         "list of these") from None
    hits = np.flatnonzero(steps == want)
    if len(hits) == 0:
        raise ProbeError(f"{path}: no snapshot at step {want}; steps are {listed(steps)}")
    return [int(hits[0])]


def listed(steps, first: int = 4, last: int = 2) -> str:
    """The steps for a message: every one when they are 10 or fewer, else the ``first`` ones and the ``last``
    ones with the count (``0, 1, 2, 4, ..., 2750, 3000 (21 snapshots)``)."""
    steps = [str(int(s)) for s in steps]
    if len(steps) <= 10:
        return ", ".join(steps)
    return f"{', '.join(steps[:first])}, ..., {', '.join(steps[-last:])} ({len(steps)} snapshots)"
