"""Numerics shared by the probes: unit rows, cosine matrices, rank and linear correlation."""
from __future__ import annotations

import numpy as np


def unit_rows(X: np.ndarray, dtype=np.float64) -> tuple[np.ndarray, np.ndarray]:
    """(rows of ``X`` scaled to length 1, the (k,) row norms); a zero row stays zero."""
    X = np.asarray(X, dtype=dtype)
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    return np.divide(X, norms, out=np.zeros_like(X), where=norms > 0), norms[:, 0]


def cosine_matrix(vectors: np.ndarray) -> np.ndarray:
    """(k, d) -> (k, k) cosine similarities in float64; a zero vector has cosine 0 with everything."""
    u, _ = unit_rows(vectors)
    return np.clip(u @ u.T, -1.0, 1.0)


def average_ranks(x: np.ndarray) -> np.ndarray:
    """Ranks 1..n of ``x``, ties given their average rank."""
    _, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    ends = np.cumsum(counts)
    return (ends - (counts - 1) / 2.0)[inverse]


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman rank correlation with average ranks for ties (NaN if either side is constant)."""
    return pearson(average_ranks(np.asarray(x)), average_ranks(np.asarray(y)))


def pearson(a: np.ndarray, b: np.ndarray) -> float:
    """Pearson correlation (NaN if fewer than 2 points or either side is constant)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.size < 2 or a.std() == 0 or b.std() == 0:
        return float("nan")
    return float(np.corrcoef(a, b)[0, 1])


def zero_rows(X: np.ndarray) -> np.ndarray:
    """Indices of the all-zero rows of ``X``."""
    return np.flatnonzero(~np.asarray(X).any(axis=1))


def exp_entropy(weights: np.ndarray) -> float:
    """exp(entropy) of ``weights`` normalised to sum 1 (Roy & Vetterli's effective rank when the
    weights are singular values); 1 = one direction, n = n equal ones; NaN when all are 0."""
    w = np.asarray(weights, dtype=np.float64)
    total = w.sum()
    if total <= 0:
        return float("nan")
    p = w[w > 0] / total
    return float(np.exp(-(p * np.log(p)).sum()))


def nonfinite(X: np.ndarray) -> tuple[np.ndarray | None, int, int]:
    """What of ``X`` (any shape) is not finite: ``(None, 0, 0)`` when every value is finite (integer
    and boolean arrays always are); else (the boolean mask of X's finite values, same shape as X,
    the count of NaN, the count of +-inf). One pass over X when it is finite, the common case."""
    X = np.asarray(X)
    if X.dtype.kind not in "fc":
        return None, 0, 0
    ok = np.isfinite(X)
    if ok.all():
        return None, 0, 0
    nan = int(np.count_nonzero(np.isnan(X)))
    return ok, nan, int(ok.size - np.count_nonzero(ok)) - nan


def finite_rows(ok: np.ndarray) -> np.ndarray:
    """(k,) whether row i of a finite-value mask ``ok`` (k, ...) is finite throughout."""
    ok = np.asarray(ok)
    return ok.reshape(len(ok), -1).all(axis=1) if ok.ndim > 1 else ok


def named(name: str, fn, *args, **kwargs):
    """``fn(*args, **kwargs)``, a LinAlgError from it carrying ``name`` (``exc.matrix``): which
    matrix of several did not converge."""
    try:
        return fn(*args, **kwargs)
    except np.linalg.LinAlgError as exc:
        exc.matrix = name
        raise
