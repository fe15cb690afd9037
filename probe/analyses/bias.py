"""Paper 1's reasoning-bias metric from per-split losses."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .base import Result

#: below this loss of split B (nats), ΔL = (L_A - L_B) / L_B divides by next to nothing: a split learned
#: by heart (an anchor run's rsn_train late in training) sends it to hundreds on a loss difference of 0.01
TINY_LOSS = 1e-3


@dataclass
class BiasResult(Result):
    """Reasoning bias ΔL = (L_A - L_B) / L_B at one step.

    Returned by [`probe.bias`][probe.probes.bias.bias]. ΔL > 0 when split B (reasoning) is learned faster. Besides
    the attributes below, every result has ``step`` and ``warnings`` ([`Result`][probe.analyses.base.Result]).

    Attributes
    ----------
    split_a : str
        Split A (memory).
    split_b : str
        Split B (reasoning).
    loss_a : float
        L_A, the loss of split A.
    loss_b : float
        L_B, the loss of split B.
    delta_L : float
        ΔL = (L_A - L_B) / L_B: the papers' ΔL and the CLI's column.
    """

    split_a: str = ""
    split_b: str = ""
    loss_a: float = float("nan")
    loss_b: float = float("nan")
    delta_L: float = float("nan")

    def summary(self) -> dict[str, float]:
        return {f"loss[{self.split_a}]": self.loss_a, f"loss[{self.split_b}]": self.loss_b, "delta_L": self.delta_L}


def reasoning_bias(loss_a: np.ndarray, loss_b: np.ndarray, steps: np.ndarray, split_a: str, split_b: str
                   ) -> list[BiasResult]:
    """One result per step; loss_a, loss_b, steps are aligned (n,) arrays."""
    loss_a, loss_b = np.asarray(loss_a, float), np.asarray(loss_b, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        delta = (loss_a - loss_b) / loss_b
    out = []
    for s, a, b, d in zip(steps, loss_a, loss_b, delta):
        r = BiasResult(step=int(s), split_a=split_a, split_b=split_b, loss_a=float(a), loss_b=float(b),
                       delta_L=float(d))
        if np.isfinite(b) and abs(b) < TINY_LOSS:
            # the same words at every step, so a trajectory says it once (the API passes each message on once)
            r.warnings.append(f"loss[{split_b}] is below {TINY_LOSS:g} at some step: delta_L = (L_A - L_B) / L_B "
                              "divides by a near-zero loss there, and is not meaningful")
        out.append(r)
    return out
