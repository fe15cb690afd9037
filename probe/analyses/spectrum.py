"""Data-free spectral metrics of a weight matrix, as WeightWatcher users know them.

For W (N x M) the eigenvalues are lambda = sigma^2 of W^T W (no 1/N normalisation):
``spectral_norm`` = lambda_max = ||W||_2^2, ``norm`` = ||W||_F^2, ``log_norm`` = log10 ||W||_F^2,
``stable_rank`` = ||W||_F^2 / ||W||_2^2, ``entropy_rank`` = exp(entropy of sigma / sum sigma) (Roy &
Vetterli's effective rank of W; named apart from ``condense``'s ``effective_rank``, which is the same
formula on the covariance eigenvalues lambda of a set of vectors),
and ``alpha``: the exponent of a power law fitted to the tail of the eigenvalue density, with
every eigenvalue above 1e-5 tried as xmin (a Hill / maximum-likelihood estimate for each) and the
one with the smallest Kolmogorov-Smirnov distance kept — vectorised over xmin here, where
WeightWatcher loops in Python.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ._stats import exp_entropy
from .base import Result, jsonable

EVALS_MIN = 1e-5


def eigenvalues(W: np.ndarray) -> np.ndarray:
    """sigma^2 of W, ascending, from the Gram matrix of its shorter side (float64)."""
    W = np.asarray(W, dtype=np.float64)
    if W.shape[0] < W.shape[1]:
        W = W.T                                   # tall: the M x M Gram matrix is the small one
    ev = np.linalg.eigvalsh(W.T @ W)
    return np.clip(ev, 0.0, None)


def powerlaw_alpha(evals: np.ndarray, min_tail: int = 2) -> tuple[float, float, float, float]:
    """(alpha, xmin, xmax, KS distance) of the best power-law tail fit of ``evals``."""
    x = np.sort(np.asarray(evals, dtype=np.float64))
    x = x[x > EVALS_MIN]
    n_all = len(x)
    if n_all < min_tail + 1:
        return float("nan"), float("nan"), float("nan"), float("nan")
    logx = np.log(x)
    suffix = np.cumsum(logx[::-1])[::-1]          # sum of log x[k:]
    best = (np.inf, float("nan"), float("nan"))
    for k in range(n_all - min_tail):
        n = n_all - k
        s = suffix[k] - n * logx[k]
        if s <= 0:
            continue
        alpha = 1.0 + n / s
        tail = x[k:]
        cdf_fit = 1.0 - (tail / x[k]) ** (1.0 - alpha)
        cdf_emp = np.arange(n) / n
        d = float(np.max(np.abs(cdf_emp - cdf_fit)))
        if d < best[0]:
            best = (d, alpha, x[k])
    d, alpha, xmin = best
    return float(alpha), float(xmin), float(x[-1]), float(d)


@dataclass
class LayerSpectrum:
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


def layer_spectrum(name: str, W: np.ndarray) -> LayerSpectrum:
    ev = eigenvalues(W)
    fro = float(ev.sum())
    top = float(ev[-1]) if ev.size else float("nan")
    eff = exp_entropy(np.sqrt(ev[ev > 0]))
    alpha, xmin, xmax, ks = powerlaw_alpha(ev)
    return LayerSpectrum(name, tuple(int(s) for s in W.shape), top, fro, float(np.log10(fro)) if fro > 0 else float("nan"),
                         fro / top if top > 0 else float("nan"), eff, alpha, xmin, xmax, ks, int(ev.size))


@dataclass
class SpectrumResult(Result):
    """One row per linear layer (see the module docstring for each metric)."""

    layers: list[LayerSpectrum] = field(default_factory=list)

    def summary(self) -> dict[str, float]:
        a = np.array([l.alpha for l in self.layers], dtype=float)
        return {"layers": float(len(self.layers)), "mean_alpha": float(np.nanmean(a)) if np.isfinite(a).any() else float("nan"),
                "mean_log_norm": float(np.mean([l.log_norm for l in self.layers])) if self.layers else float("nan")}

    def rows(self):
        return [(k, l.name, v) for l in self.layers for k, v in l.as_row().items()
                if k not in ("name", "shape")]

    def to_dict(self) -> dict:
        return {"step": self.step, "layers": [jsonable(dict(l.as_row(), shape=list(l.shape))) for l in self.layers]}


def spectrum(matrices: dict[str, np.ndarray], step: int | None = None) -> SpectrumResult:
    """matrices: name -> 2-D weight, in the order to report."""
    return SpectrumResult(step=step, layers=[layer_spectrum(n, W) for n, W in matrices.items()])
