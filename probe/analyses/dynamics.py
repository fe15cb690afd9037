"""Training dynamics from the per-step loss log (paper 4's cost side of small initialization): when
the loss escapes its initial plateau and how often it spikes.

escape step  the first step at which the loss, averaged over ``window`` steps, is below
             ln V − ``delta`` (ln V: the loss of a uniform guess over the vocabulary)
spike        a step whose loss exceeds ``spike_factor`` times the median of the ``spike_window``
             steps before it; consecutive such steps are one spike

A loop that logged its loss every few steps (a Trainer's ``logging_steps``) gives a log with gaps: the
windows then count logged steps, and the steps reported are the logged steps' own.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .base import Result

DELTA = 0.5
SMOOTH = 10
SPIKE_FACTOR = 1.3     # measured on llm-quick: step-to-step noise stays below 1.2x the running median
SPIKE_WINDOW = 50


@dataclass
class DynamicsResult(Result):
    """Escape from the loss plateau and loss spikes, from the per-step loss log up to one step.

    Returned by [`probe.dynamics`][probe.probes.dynamics.dynamics]. Besides the attributes below, every result has
    ``step`` and ``warnings`` ([`Result`][probe.analyses.base.Result]).

    Attributes
    ----------
    steps_logged : int
        Steps of the log used (those whose loss the loop gave).
    plateau : float
        ln V, the loss of a uniform guess over the vocabulary.
    delta : float
        How far below ``plateau`` the smoothed loss must fall to have escaped.
    escape_step : int or None
        The first step below ``plateau - delta`` (``None``: never escaped).
    spikes : int
        Loss spikes (a run of spiking steps counts once).
    spike_steps : list of int
        The step each spike starts at.
    initial_loss : float
        Mean loss of the first ``smooth`` steps.
    final_loss : float
        Mean loss of the last ``smooth`` steps.
    """

    steps_logged: int = 0
    plateau: float = float("nan")
    delta: float = DELTA
    escape_step: int | None = None
    spikes: int = 0
    spike_steps: list[int] = field(default_factory=list)
    initial_loss: float = float("nan")
    final_loss: float = float("nan")

    def summary(self) -> dict[str, float | int]:
        # steps and counts stay integers (a table prints 30, not 30.0000); a run that never escaped has no
        # escape step: NaN, which tables print as '-' and JSON and CSV as null / an empty cell
        return {"escape_step": float("nan") if self.escape_step is None else int(self.escape_step),
                "spikes": int(self.spikes), "initial_loss": self.initial_loss, "final_loss": self.final_loss,
                "plateau": self.plateau}


def loss_dynamics(losses: np.ndarray, vocab: int, *, steps: np.ndarray | None = None, delta: float = DELTA,
                  window: int = SMOOTH, spike_factor: float = SPIKE_FACTOR, spike_window: int = SPIKE_WINDOW,
                  step: int | None = None) -> DynamicsResult:
    """losses (k,) the training loss of the logged steps, ``steps`` (k,) increasing, their step numbers
    (default: row t is step t, every step logged); vocab the vocabulary size."""
    x = np.asarray(losses, dtype=np.float64)
    at = np.arange(len(x)) if steps is None else np.asarray(steps, dtype=np.int64)
    plateau = float(np.log(vocab))
    res = DynamicsResult(step=step, steps_logged=len(x), plateau=plateau, delta=delta)
    if len(x) == 0:
        res.warnings.append("no steps logged")
        return res
    w = max(1, min(window, len(x)))
    smooth = np.convolve(x, np.ones(w) / w, mode="valid")        # smooth[t] averages steps t .. t + w - 1
    below = np.flatnonzero(smooth < plateau - delta)
    res.escape_step = int(at[below[0] + w - 1]) if below.size else None
    flagged = [t for t in range(spike_window, len(x))
               if x[t] > spike_factor * np.median(x[t - spike_window:t])]
    starts = [t for i, t in enumerate(flagged) if i == 0 or flagged[i - 1] != t - 1]
    res.spikes, res.spike_steps = len(starts), [int(at[t]) for t in starts]
    res.initial_loss, res.final_loss = float(x[:w].mean()), float(x[-w:].mean())
    return res
