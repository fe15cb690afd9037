"""The ``dynamics`` probe: loss dynamics."""
from __future__ import annotations

import os

import numpy as np

from ..limits import MAX_MEMORY, budgeted
from ..analyses.dynamics import DELTA, SPIKE_FACTOR, SPIKE_WINDOW, DynamicsResult, loss_dynamics
from ..analyses.dynamics import SMOOTH
from ..api.checks import with_warnings
from ..api.finite import Finite
from ..params import STEP_GRAMMAR, check_number
from ..registry import SNAPSHOT, Probe
from ..readers.source import open_snapshot


@budgeted
def dynamics(path: str | os.PathLike, *, step: str | int = "latest", delta: float = DELTA, smooth: int = SMOOTH,
             spike_factor: float = SPIKE_FACTOR, spike_window: int = SPIKE_WINDOW, allow_nonfinite: bool = False,
             max_memory: int | str | None = MAX_MEMORY
             ) -> list[DynamicsResult]:
    """When the loss escapes its initial plateau, and how often it spikes, from the per-step loss log.

    For each selected snapshot the log up to its step is read. The escape step is the first step at which
    the loss, averaged over ``smooth`` steps, is below ln V - ``delta`` (ln V: the loss of a uniform guess
    over the vocabulary). A spike is a loss above ``spike_factor`` times the median of the
    ``spike_window`` steps before it; a run of such steps is one spike. A recorded loop that logged its
    loss every few steps (a Trainer's ``logging_steps``) is read at the steps it logged: the windows
    count those steps.

    Parameters
    ----------
    {path}
    {step}
    {delta}
    {smooth}
    {spike_factor}
    {spike_window}
    {allow_nonfinite}
    {max_memory}

    Returns
    -------
    Results[DynamicsResult]
        One result per selected step: ``escape_step`` (``None``: not escaped), ``spikes``,
        ``spike_steps``, ``plateau``, ``initial_loss`` and ``final_loss``.

    Raises
    ------
    ProbeError
        A file without the per-step loss log (written before schema 1.3); a bad parameter or step; a
        loss that is NaN or inf (without ``allow_nonfinite``).

    Examples
    --------
    >>> import probe
    >>> d = probe.dynamics("run.h5")[0]
    >>> d.escape_step, d.spikes, d.spike_steps
    """
    check_number("delta", delta)
    check_number("smooth", smooth)
    check_number("spike_factor", spike_factor)
    check_number("spike_window", spike_window)
    with open_snapshot(path, "dynamics") as run:
        indices = run.step_indices(step)
        losses, given = run.step_losses(), run.step_logged()
        vocab = int(run.dims["vocab"])
        steps = run.steps
        check = Finite(run.path, allow_nonfinite)
    end = max(int(steps[i]) for i in indices)
    first = np.flatnonzero(given[:end] & ~np.isfinite(losses[:end]))   # (a step the loop gave no loss: not one)
    if first.size:   # row t of the log is step t
        check(f"step_loss (the per-step loss log, the first at step {int(first[0])})", losses[:end][given[:end]],
              None, f"the log is used before step {int(first[0])}")
        given = given[:int(first[0])]
    logged = np.flatnonzero(given)
    results = []
    for i in indices:
        rows = logged[logged < int(steps[i])]
        results.append(loss_dynamics(losses[rows], vocab, steps=rows, delta=delta, window=smooth,
                                     spike_factor=spike_factor, spike_window=spike_window, step=int(steps[i])))
    check.warn()
    return with_warnings(results)


PROBE = Probe("dynamics", SNAPSHOT, "Loss dynamics", function=dynamics,
              options={"step": f"the snapshots up to which the loss log is read: {STEP_GRAMMAR}"},
              whole_run="latest", result="dynamics.DynamicsResult",
              metrics=("escape_step", "spikes", "initial_loss", "final_loss", "plateau"),
              example="probe dynamics run.h5",
              examples=("probe dynamics run.h5 --step all --spike-factor 1.5 --plot dynamics.png",),
              nonfinite="the loss log is cut before its first one",
              help="From the per-step loss log: the escape step (loss below ln V - delta, smoothed) and the loss "
                   "spikes.")
