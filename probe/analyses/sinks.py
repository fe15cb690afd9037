"""Attention sinks (paper 4): heads that park their attention on the first position.

For a query at position i >= ``min_query`` the sink mass is its attention on position 0; causal
averaging would give 1 / (i + 1). A head is a sink head when its mean sink mass reaches
``threshold``. Sinks come with a first-position hidden state whose norm stands far above the
others' (the "massive activation"), reported as its ratio to the median of the other positions.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .base import Result

MIN_QUERY = 4       # queries past the first few: position 0 is all a query at position 0 can see
SINK_THRESHOLD = 0.3


@dataclass
class SinksResult(Result):
    """Attention-sink statistics at one step.

    Returned by [`probe.sinks`][probe.probes.sinks.sinks]. The attributes carry the names of the summary's
    metrics (``sink_mass[layer0.head1]``). Besides the attributes below, every result has ``step`` and ``warnings``
    ([`Result`][probe.analyses.base.Result]).

    Attributes
    ----------
    sink_mass : ndarray of float, shape (layers, heads)
        Mean attention on position 0 of the queries at positions >= ``min_query``.
    uniform_mass : float
        The same under causal averaging (a reference: the mean of 1 / (i + 1)).
    threshold : float
        The sink mass at or above which a head is a sink head.
    min_query : int
        The first query position counted.
    sink_heads : ndarray of bool, shape (layers, heads)
        ``sink_mass >= threshold``.
    first_norm_ratio : ndarray of float, shape (blocks,), or None
        Norm of position 0's residual stream over the median of the other positions, entering each block
        and leaving the last (``None`` where the residual norms are not stored).
    """

    sink_mass: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    uniform_mass: float = float("nan")
    threshold: float = SINK_THRESHOLD
    min_query: int = MIN_QUERY
    sink_heads: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), bool))
    first_norm_ratio: np.ndarray | None = None

    def summary(self) -> dict[str, float]:
        out = {"sink_head_fraction": float(self.sink_heads.mean()) if self.sink_heads.size else float("nan"),
               "mean_sink_mass": float(self.sink_mass.mean()) if self.sink_mass.size else float("nan"),
               "uniform_mass": self.uniform_mass}
        out.update({f"sink_mass[layer{l}]": float(row.mean()) for l, row in enumerate(self.sink_mass)})
        out.update({f"sink_mass[layer{l}.head{h}]": float(v) for l, row in enumerate(self.sink_mass)
                    for h, v in enumerate(row)})
        if self.first_norm_ratio is not None:
            last = len(self.first_norm_ratio) - 1
            for b, v in enumerate(self.first_norm_ratio):
                out[f"first_norm_ratio[{'block' + str(b) if b < last else 'out'}]"] = float(v)
        return out


def attention_sinks(attention: np.ndarray, hidden_norm: np.ndarray | None = None, *, min_query: int = MIN_QUERY,
                    threshold: float = SINK_THRESHOLD, step: int | None = None) -> SinksResult:
    """attention (layers, heads, B, T, T) causal attention probabilities; hidden_norm (blocks, B, T)
    residual-stream norms per position (or None)."""
    A = np.asarray(attention, dtype=np.float64)
    T = A.shape[-1]
    q0 = min(min_query, T - 1)
    mass = A[..., q0:, 0].mean(axis=(2, 3))                       # (layers, heads)
    uniform = float(np.mean(1.0 / (np.arange(q0, T) + 1)))
    warnings = []
    if q0 < min_query:   # a short sequence: at T = 1 position 0 is all there is, and every head reads as a sink
        warnings.append(f"sequences of {T} tokens: the sink mass counts queries from position {q0}, not from "
                        f"the {min_query} asked for")
    ratio = None
    if hidden_norm is not None:
        hn = np.asarray(hidden_norm, dtype=np.float64)
        if hn.shape[-1] > 1:
            med = np.median(hn[..., 1:], axis=-1)                  # (blocks, B)
            ratio = np.where(med > 0, hn[..., 0] / np.where(med > 0, med, 1), np.nan).mean(axis=1)
    return SinksResult(step=step, sink_mass=mass, uniform_mass=uniform, threshold=threshold, min_query=q0,
                       sink_heads=mass >= threshold, first_norm_ratio=ratio, warnings=warnings)
