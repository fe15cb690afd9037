"""Data-free spectral metrics of a weight matrix, as WeightWatcher users know them.

For W (N x M) the eigenvalues are lambda = sigma^2 of W^T W (no 1/N normalisation):
``spectral_norm`` = lambda_max = ||W||_2^2, ``norm`` = ||W||_F^2, ``log_norm`` = log10 ||W||_F^2,
``stable_rank`` = ||W||_F^2 / ||W||_2^2, ``entropy_rank`` = exp(entropy of sigma / sum sigma) (Roy &
Vetterli's effective rank of W; named apart from ``condense``'s ``effective_rank``, which is the same
formula on the covariance eigenvalues lambda of a set of vectors),
and ``alpha``: the exponent of a power law fitted to the tail of the eigenvalue density, with
every eigenvalue above 1e-5 tried as xmin (a Hill / maximum-likelihood estimate for each) and the
one with the smallest Kolmogorov-Smirnov distance kept — vectorised over xmin here, where
WeightWatcher loops in Python. ``precision`` float32 forms the Gram matrix in single precision
(about twice as fast; eigenvalues to ~1e-6 relative, see bench/bench_spectrum.py); float64 matches
WeightWatcher's SVD to machine precision.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .stats import exp_entropy
from .base import Result, jsonable

EVALS_MIN = 1e-5
PRECISIONS = ("float64", "float32")


def eigenvalues(W: np.ndarray, precision: str = "float64") -> np.ndarray:
    """sigma^2 of W, ascending, from the Gram matrix of its shorter side (W^T W: numpy forms it with a
    symmetric rank-k update, half a general product)."""
    W = np.asarray(W, dtype=precision)
    if W.shape[0] < W.shape[1]:
        W = W.T                                   # tall: the M x M Gram matrix is the small one
    G = W.T @ W
    ev = np.linalg.eigvalsh(G.astype(np.float64, copy=False))
    return np.clip(ev, 0.0, None)


def powerlaw_alpha(evals: np.ndarray, min_tail: int = 2, rows: int = 64) -> tuple[float, float, float, float]:
    """(alpha, xmin, xmax, KS distance) of the best power-law tail fit of ``evals``.

    For each candidate xmin = x[k]: the Hill estimate alpha_k = 1 + n_k / sum(log(x[k:] / x[k])) and
    the KS distance max_i |(i - k) / n_k - (1 - (x_i / x_k)^(1 - alpha_k))| over the tail i >= k, for
    ``rows`` candidates at a time (a block of the candidates x eigenvalues table, written with exp
    rather than a power: 16x faster than one candidate at a time on 384 eigenvalues).
    """
    x = np.sort(np.asarray(evals, dtype=np.float64))
    x = x[x > EVALS_MIN]
    n_all = len(x)
    if n_all < min_tail + 1:
        return float("nan"), float("nan"), float("nan"), float("nan")
    logx = np.log(x)
    suffix = np.cumsum(logx[::-1])[::-1]          # sum of log x[k:]
    K = n_all - min_tail
    ks = np.arange(K)
    n = (n_all - ks).astype(np.float64)
    s = suffix[:K] - n * logx[:K]
    ok = s > 0
    alpha = np.where(ok, 1.0 + n / np.where(ok, s, 1.0), np.nan)
    d = np.full(K, np.inf)
    for lo in range(0, K, rows):
        hi = min(K, lo + rows)
        t = (logx[None, lo:] - logx[lo:hi, None]) * (1.0 - alpha[lo:hi, None])
        np.exp(t, out=t)                                       # (x_i / x_k)^(1 - alpha_k)
        cols = np.arange(lo, n_all)[None, :]
        k = ks[lo:hi, None]
        t += (cols - k) / n[lo:hi, None] - 1.0                 # empirical minus fitted CDF
        np.abs(t, out=t)
        t[cols < k] = 0.0                                      # only the tail of each candidate
        d[lo:hi] = np.where(ok[lo:hi], t.max(axis=1), np.inf)
    if not np.isfinite(d).any():
        return float("nan"), float("nan"), float("nan"), float("nan")
    best = int(np.argmin(d))                      # the first of equal distances, as a loop keeps
    return float(alpha[best]), float(x[best]), float(x[-1]), float(d[best])


@dataclass
class LayerSpectrum:
    """The spectral metrics of one weight matrix W (N x M), from the eigenvalues λ = σ² of W^T W.

    Attributes
    ----------
    name : str
        The matrix.
    shape : tuple of (int, int)
        (N, M).
    spectral_norm : float
        λ_max = ||W||_2².
    norm : float
        ||W||_F² = Σλ.
    log_norm : float
        log10 of ``norm``.
    stable_rank : float
        ||W||_F² / ||W||_2².
    entropy_rank : float
        exp(entropy of σ / Σσ): the effective rank of W (Roy and Vetterli).
    alpha : float
        Exponent of the power law fitted to the tail of the eigenvalue density (the xmin with the smallest
        Kolmogorov-Smirnov distance; NaN with too few eigenvalues).
    xmin : float
        Where that tail starts.
    xmax : float
        The largest eigenvalue.
    ks_distance : float
        The fit's Kolmogorov-Smirnov distance.
    num_evals : int
        Eigenvalues: min(N, M).
    """

    name: str
    shape: tuple[int, int]
    spectral_norm: float
    norm: float
    log_norm: float
    stable_rank: float
    entropy_rank: float
    alpha: float
    xmin: float
    xmax: float
    ks_distance: float
    num_evals: int

    def as_row(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def layer_spectrum(name: str, W: np.ndarray, precision: str = "float64") -> LayerSpectrum:
    ev = eigenvalues(W, precision)
    fro = float(ev.sum())
    top = float(ev[-1]) if ev.size else float("nan")
    eff = exp_entropy(np.sqrt(ev[ev > 0]))
    alpha, xmin, xmax, ks = powerlaw_alpha(ev)
    return LayerSpectrum(name, tuple(int(s) for s in W.shape), top, fro, float(np.log10(fro)) if fro > 0 else float("nan"),
                         fro / top if top > 0 else float("nan"), eff, alpha, xmin, xmax, ks, int(ev.size))


@dataclass
class SpectrumResult(Result):
    """Spectral metrics of every linear layer at one step, one row each.

    Returned by [`probe.spectrum`][probe.probes.spectrum.spectrum]. Besides the attributes below, every result has
    ``step`` and ``warnings`` ([`Result`][probe.analyses.base.Result]).

    Attributes
    ----------
    layers : list of LayerSpectrum
        One per weight matrix, in the order reported.
    """

    layers: list[LayerSpectrum] = field(default_factory=list)

    def summary(self) -> dict[str, float | int]:
        a = np.array([l.alpha for l in self.layers], dtype=float)
        return {"layers": len(self.layers), "mean_alpha": float(np.nanmean(a)) if np.isfinite(a).any() else float("nan"),
                "mean_log_norm": float(np.mean([l.log_norm for l in self.layers])) if self.layers else float("nan")}

    def rows(self):
        return [(k, l.name, v) for l in self.layers for k, v in l.as_row().items()
                if k not in ("name", "shape")]

    def to_dict(self) -> dict:
        return {"step": self.step, "layers": [jsonable(dict(l.as_row(), shape=list(l.shape))) for l in self.layers]}
