"""The ``bias`` probe: reasoning bias ΔL."""
from __future__ import annotations

import os

import numpy as np

from ..limits import MAX_MEMORY, budgeted
from ..analyses.bias import BiasResult, reasoning_bias
from ..api.checks import with_warnings
from ..api.finite import Finite
from ..errors import ProbeError, param
from ..registry import SNAPSHOT, Probe
from ..readers.source import open_snapshot


@budgeted
def bias(path: str | os.PathLike, splits: tuple[str, str] | None = None, *, step: str | int = "latest",
         allow_nonfinite: bool = False,
         max_memory: int | str | None = MAX_MEMORY) -> list[BiasResult]:
    """Reasoning bias ΔL = (L_A - L_B) / L_B from the stored per-split losses, per step.

    ΔL > 0 when split B (reasoning) is learned faster than split A (memory). Below a loss of 1e-3 of
    split B the ratio divides by next to nothing, and a warning says so.

    Parameters
    ----------
    {path}
    {splits}
    {step}
    {allow_nonfinite}
    {max_memory}

    Returns
    -------
    Results[BiasResult]
        One result per selected step (without the steps left out): ``split_a``, ``split_b``,
        ``loss_a``, ``loss_b`` and ``delta_L``.

    Raises
    ------
    ProbeError
        Not exactly two ``splits``; an unknown split or step; a loss that is NaN or inf (without
        ``allow_nonfinite``), or no step left with it.

    Examples
    --------
    >>> import probe
    >>> [(r.step, r.delta_L) for r in probe.bias("run.h5", step="all")]
    >>> probe.bias("run.h5", splits=("mem", "rsn_test"))[0].delta_L
    """
    if splits is not None and len(splits) != 2:
        raise ProbeError(f"{param('splits')} takes exactly two splits, A then B")
    with open_snapshot(path, "bias") as run:
        known = run.splits
        if splits is None:
            fallback = ("mem", "rsn_train") if run.task.get("kind") == "anchor" else (known[0], known[-1])
            splits = tuple(run.task.get("bias_splits", fallback))
        for s in splits:
            if s not in known:
                raise ProbeError(f"unknown split '{s}'; this run has {', '.join(known)}")
        if splits[0] == splits[1]:   # (a run recorded with its training loss alone has one split)
            which = f"this run has only {known[0]}" if len(known) == 1 else f"both are {splits[0]}"
            raise ProbeError(f"{path}: bias compares two splits; {which} (give {param('splits')} A then B)")
        indices = run.step_indices(step)
        m = run.metrics()
        steps = run.steps
        check = Finite(run.path, allow_nonfinite)
    a, b, at = m[splits[0]]["loss"][indices], m[splits[1]]["loss"][indices], steps[indices]
    keep = np.ones(len(at), bool)
    for split, x in ((splits[0], a), (splits[1], b)):
        for k in np.flatnonzero(~np.isfinite(x)):   # named per step, like a tensor
            check(f"loss[{split}]", x[k:k + 1], int(at[k]), "the steps holding them left out")
            keep[k] = False
    if not keep.any():
        raise ProbeError(f"{check.found()}: no selected step is left")
    check.warn()
    return with_warnings(reasoning_bias(a[keep], b[keep], at[keep], splits[0], splits[1]))


PROBE = Probe("bias", SNAPSHOT, "Reasoning bias ΔL", function=bias, result="bias.BiasResult",
              metrics=("loss", "delta_L"), example="probe bias run.h5 --step all",
              examples=("probe bias run.h5 --splits rsn_train --splits rsn_test",),
              nonfinite="the steps whose losses hold one are left out",
              help="Reasoning bias Delta L = (L_A - L_B) / L_B from the stored per-split losses (--step all for "
                   "the trajectory).")
