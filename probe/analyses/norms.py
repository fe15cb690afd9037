"""ε-saturation of normalisation layers (paper 4).

A norm divides its input by sqrt(m + ε), with m = mean(x²) per token for RMSNorm (var(x) for
LayerNorm). When the activations are tiny — as in a small-initialised model — ε is no longer
negligible next to m: the layer stops normalising and scales its input down instead. The ε share
s = ε / (m + ε) measures it: 0 is a clean normalisation, 1 a layer that only divides by sqrt(ε).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .base import Result

SATURATION = 0.1   # s at which a site counts as saturated: its output rms is sqrt(1 - s) <= 0.95 of a clean norm's


@dataclass
class NormsResult(Result):
    """ε share and effective gain of every norm site at one step.

    Returned by [`probe.norms`][probe.probes.norms.norms]. k norm sites. Besides the attributes below, every
    result has ``step`` and ``warnings`` ([`Result`][probe.analyses.base.Result]).

    Attributes
    ----------
    sites : list of str, length k
        The site names (``layer0/attn_norm``, ..., ``final_norm``).
    eps : float
        The norms' ε.
    mean_square : ndarray of float, shape (k,)
        Mean over the tokens of m (mean(x²), or var(x) for LayerNorm).
    median_square : ndarray of float, shape (k,), or None
        The median over the tokens (``None`` where not measured).
    eps_share : ndarray of float, shape (k,)
        s = ε / (mean_square + ε).
    gain : ndarray of float, shape (k,), or None
        The rms of each norm's weight (``None`` where not stored).
    effective_gain : ndarray of float, shape (k,)
        gain / sqrt(mean_square + ε): the factor the norm multiplies its input by.
    saturation : float
        The ε share at or above which a site counts as saturated.
    saturated : list of str
        The saturated sites.
    """

    sites: list[str] = field(default_factory=list)
    eps: float = float("nan")
    mean_square: np.ndarray = field(default_factory=lambda: np.zeros(0))
    median_square: np.ndarray | None = None
    eps_share: np.ndarray = field(default_factory=lambda: np.zeros(0))
    gain: np.ndarray | None = None
    effective_gain: np.ndarray = field(default_factory=lambda: np.zeros(0))
    saturation: float = SATURATION
    saturated: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, float | int]:
        out = {"max_eps_share": float(self.eps_share.max()) if self.eps_share.size else float("nan"),
               "saturated_sites": len(self.saturated)}
        for m in ("eps_share", "effective_gain", "mean_square"):
            out.update({f"{m}[{s}]": float(v) for s, v in zip(self.sites, getattr(self, m))})
        return out


def eps_share(mean_square: np.ndarray, eps: float) -> np.ndarray:
    """s = ε / (m + ε) elementwise."""
    m = np.asarray(mean_square, dtype=np.float64)
    return eps / (m + eps)


def norm_saturation(sites: list[str], mean_square: np.ndarray, eps: float, *, gain: np.ndarray | None = None,
                    median_square: np.ndarray | None = None, saturation: float = SATURATION,
                    step: int | None = None) -> NormsResult:
    """sites (k,), mean_square (k,) measured per site, eps the norms' ε, gain (k,) the rms of each
    site's weight (None: taken as 1 for the effective gain)."""
    m = np.asarray(mean_square, dtype=np.float64)
    s = eps_share(m, eps)
    g = np.ones_like(m) if gain is None else np.asarray(gain, dtype=np.float64)
    return NormsResult(step=step, sites=list(sites), eps=float(eps), mean_square=m,
                       median_square=None if median_square is None else np.asarray(median_square, np.float64),
                       eps_share=s, gain=None if gain is None else g, effective_gain=g / np.sqrt(m + eps),
                       saturation=saturation, saturated=[x for x, v in zip(sites, s) if v >= saturation],
                       warnings=["a norm site saw all-zero inputs: its ε share is 1"] if np.any(m <= 0) else [])


def gain_rms(weight: np.ndarray) -> float:
    """The effective gain of a norm's weight vector: its root mean square (float64), 1 for a norm
    without a weight."""
    return float(np.sqrt(np.mean(np.square(weight, dtype=np.float64))))
